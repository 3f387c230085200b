"""API keys: ``efk_<id>_<secret>``; only a SHA-256 of the secret is stored.

The secret is 256 random bits, so a fast hash is enough: there is nothing
to brute-force, and lookups by the public id keep verification O(1).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from libs.auth.principal import Principal, Role

_KEY = re.compile(r"^efk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class ApiKeySecret:
    key_id: str
    secret: str

    @property
    def token(self) -> str:
        return f"efk_{self.key_id}_{self.secret}"


@dataclass(frozen=True)
class KeyRecord:
    key_id: str
    organization_id: str
    project_id: str | None
    role: Role
    secret_hash: bytes
    revoked: bool


class KeyStore(Protocol):
    async def find_key(self, key_id: str) -> KeyRecord | None: ...


def new_api_key() -> ApiKeySecret:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    key_id = "".join(secrets.choice(alphabet) for _ in range(12))
    return ApiKeySecret(key_id, secrets.token_urlsafe(32))


def parse_api_key(token: str) -> ApiKeySecret | None:
    match = _KEY.match(token)
    return ApiKeySecret(match[1], match[2]) if match else None


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def verify(record: KeyRecord, presented: ApiKeySecret) -> Principal | None:
    if record.revoked or not hmac.compare_digest(record.secret_hash, hash_secret(presented.secret)):
        return None
    return Principal(record.key_id, record.organization_id, record.project_id, record.role)
