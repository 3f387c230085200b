"""Key-encryption keys (KEKs) and the versioned ring they form; parsing, no I/O.

Text form, for the environment variable and the key ring file alike: entries
``VERSION:BASE64KEY`` separated by commas or newlines; ``#`` starts a comment.
Versions are positive integers, keys 32 bytes (AES-256). The highest version
is the primary: it wraps every new data key. Error messages name the entry
by position and never include key material.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

KEY_BYTES = 32
_ENTRY = re.compile(r"(\d{1,9}):([A-Za-z0-9+/=_-]+)")


class KeyRingError(ValueError):
    """A key ring that cannot be used; the message names no key material."""


@dataclass(frozen=True)
class KeyEncryptionKey:
    version: int
    material: bytes = field(repr=False)

    @classmethod
    def generate(cls, version: int) -> KeyEncryptionKey:
        return cls(version, secrets.token_bytes(KEY_BYTES))

    @property
    def fingerprint(self) -> str:
        """Identifies the key without revealing it (a key check value)."""
        digest = hashlib.sha256(b"eventflow.vault.kek-fingerprint\x00" + self.material)
        return digest.hexdigest()[:16]

    def entry(self) -> str:
        return f"{self.version}:{base64.b64encode(self.material).decode()}"


class KeyRing:
    """An immutable set of KEKs by version."""

    def __init__(self, keys: Iterable[KeyEncryptionKey]) -> None:
        by_version: dict[int, KeyEncryptionKey] = {}
        for key in keys:
            if key.version < 1:
                raise KeyRingError(f"key version {key.version} must be a positive integer")
            if len(key.material) != KEY_BYTES:
                raise KeyRingError(f"key version {key.version} must be {KEY_BYTES} bytes")
            if key.version in by_version:
                raise KeyRingError(f"key version {key.version} appears twice")
            by_version[key.version] = key
        if not by_version:
            raise KeyRingError("the key ring holds no key")
        self._keys = by_version

    @property
    def primary(self) -> KeyEncryptionKey:
        return self._keys[max(self._keys)]

    @property
    def versions(self) -> list[int]:
        return sorted(self._keys)

    def get(self, version: int) -> KeyEncryptionKey | None:
        return self._keys.get(version)

    def with_new_key(self) -> tuple[KeyRing, KeyEncryptionKey]:
        """This ring plus a fresh key one version above the primary."""
        key = KeyEncryptionKey.generate(self.primary.version + 1)
        return KeyRing([*self._keys.values(), key]), key

    def __repr__(self) -> str:
        return f"KeyRing(versions={self.versions}, primary={self.primary.version})"


def parse_key_ring(text: str, source: str) -> KeyRing:
    """A ring from its text form; ``source`` names where it came from in errors."""
    keys = []
    for position, entry in enumerate(_entries(text), start=1):
        match = _ENTRY.fullmatch(entry)
        if not match:
            raise KeyRingError(f"{source}: entry {position} is not VERSION:BASE64KEY")
        try:
            material = base64.b64decode(match[2].replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise KeyRingError(f"{source}: entry {position} is not valid base64") from None
        if len(material) != KEY_BYTES:
            raise KeyRingError(
                f"{source}: entry {position} must decode to {KEY_BYTES} bytes (AES-256)"
            )
        keys.append(KeyEncryptionKey(int(match[1]), material))
    try:
        return KeyRing(keys)
    except KeyRingError as error:
        raise KeyRingError(f"{source}: {error}") from None


def _entries(text: str) -> list[str]:
    entries: list[str] = []
    for line in text.splitlines():
        content = line.split("#", 1)[0]
        entries.extend(part.strip() for part in content.split(",") if part.strip())
    return entries
