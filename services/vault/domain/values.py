"""The one type a secret value travels in, so it cannot leak by accident.

Its ``repr``, ``str`` and ``format`` are redacted: a value that ends up in a
log call, an f-string, an exception or a debugger's variable view shows
``<redacted>``. Reading the text takes an explicit ``reveal()``, which only
the encryption code and the executor's resolve answer call.
"""

from __future__ import annotations

import hmac
from typing import NoReturn

REDACTED = "SecretValue(<redacted>)"


class SecretValue:
    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def reveal(self) -> str:
        return self._text

    def encode(self) -> bytes:
        return self._text.encode()

    @classmethod
    def decode(cls, data: bytes) -> SecretValue:
        return cls(data.decode())

    @property
    def size(self) -> int:
        """Length in UTF-8 bytes (the unit of the 64 KiB limit)."""
        return len(self._text.encode())

    def __repr__(self) -> str:
        return REDACTED

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return REDACTED

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretValue):
            return NotImplemented
        return hmac.compare_digest(self.encode(), other.encode())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> NoReturn:
        # Pickling would copy the plaintext into caches, queues and files.
        raise TypeError("secret values cannot be pickled")
