"""Stand-ins for the CLI's gRPC stubs and terminals, shared by the CLI test modules."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any


class FakeStub:
    """Answers each method from ``replies``; records (method, request, metadata, timeout).

    A reply is a message, an exception to raise, a callable of the request, or a
    list of those answered in turn. A client-streaming request is recorded as a list.
    """

    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.calls: list[tuple[str, Any, Any, Any]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def method(request: Any, metadata: Any = None, timeout: Any = None) -> Any:
            if isinstance(request, Iterator):
                request = list(request)
            self.calls.append((name, request, metadata, timeout))
            reply = self.replies[name]
            if isinstance(reply, list):
                reply = reply.pop(0)
            if isinstance(reply, BaseException):
                raise reply
            return reply(request) if callable(reply) else reply

        return method

    def requests(self, name: str) -> list[Any]:
        return [request for method, request, _, _ in self.calls if method == name]


class TtyStringIO(io.StringIO):
    def isatty(self) -> bool:
        return True


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err
