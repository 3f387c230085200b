"""Small helpers for calling the API in tests and reading typed errors back."""

from __future__ import annotations

import socket
from collections.abc import Awaitable
from typing import Any, TypeVar

import grpc
import pytest
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.errors import ErrorDetails, read_error

T = TypeVar("T")


async def rpc_error(call: Awaitable[Any]) -> ErrorDetails:
    """Await a call that must fail; return its code, reason and field violations."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return read_error(caught.value)


def violation_fields(error: ErrorDetails) -> list[str]:
    return [v.field for v in error.violations]


def webhook(url: str = "https://hooks.example.com/in", **kw: Any) -> wf.Step:
    return wf.Step(type="webhook", url=url, **kw)


def action(ref: str = "score-order", **kw: Any) -> wf.Step:
    return wf.Step(type="custom_action", action=ref, **kw)


def delay(ms: int = 60_000, **kw: Any) -> wf.Step:
    return wf.Step(type="delay", duration_ms=ms, **kw)


def workflow(name: str = "Welcome", trigger: str = "user.signed_up", **kw: Any) -> wf.Workflow:
    steps = kw.pop("steps", None) or [action(), delay(), webhook()]
    return wf.Workflow(name=name, trigger_event=trigger, steps=steps, **kw)


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
