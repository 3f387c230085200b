"""An HMAC-SHA256 seal over compiled artifacts.

`Module.deserialize` maps the bytes it is given as executable code: bytes
anyone else could have written (a cache, a database row) must never reach
it. Artifacts are sealed where they are compiled and unsealed where they
are loaded, so only bytes this deployment produced are deserialized. The
optional `context` (the module's SHA-256) binds an artifact to the module
it was compiled from, so a valid artifact cannot be swapped in for another.
"""

from __future__ import annotations

import hashlib
import hmac

from .result import SealError

_MAGIC = b"EFSEAL1\x00"
_TAG = hashlib.sha256().digest_size
MIN_KEY_BYTES = 32


def _tag(key: bytes, context: str, artifact: bytes | memoryview) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the sealing key must be at least {MIN_KEY_BYTES} bytes")
    mac = hmac.new(key, _MAGIC, hashlib.sha256)
    encoded = context.encode()
    mac.update(len(encoded).to_bytes(8, "big"))
    mac.update(encoded)
    mac.update(artifact)
    return mac.digest()


def seal(artifact: bytes, key: bytes, *, context: str = "") -> bytes:
    """Prefix `artifact` with a magic and its MAC under `key` (and `context`)."""
    return _MAGIC + _tag(key, context, artifact) + artifact


def unseal(sealed: bytes, key: bytes, *, context: str = "") -> bytes:
    """The artifact inside `sealed`, or `SealError` if the MAC does not verify."""
    header = len(_MAGIC) + _TAG
    if len(sealed) <= header or not sealed.startswith(_MAGIC):
        raise SealError("not a sealed artifact")
    view = memoryview(sealed)
    expected = _tag(key, context, view[header:])
    if not hmac.compare_digest(expected, bytes(view[len(_MAGIC) : header])):
        raise SealError("artifact seal does not verify: refusing to deserialize it")
    return bytes(view[header:])
