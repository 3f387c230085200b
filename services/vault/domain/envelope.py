"""Envelope encryption of secret values with AES-256-GCM.

Each secret version gets its own random 256-bit data key (DEK). The DEK
encrypts the value once; the primary key-encryption key (KEK) of the ring
wraps the DEK. Both encryptions use a fresh random 96-bit nonce; since a DEK
encrypts exactly one message, its nonce can never repeat, and random nonces
keep the KEK far below GCM's 2^32-messages-per-key bound.

Associated data binds each ciphertext to its record: format version,
organization, action, key and secret version, and for the wrapped DEK also
the KEK version. A ciphertext (or wrapped DEK) copied to another row,
tenant, key or version fails authentication instead of decrypting, and
re-wrapping touches only the DEK, so the value is never decrypted to rotate
keys. Purpose labels keep a wrapped DEK and a value ciphertext from ever
being accepted for one another.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from services.vault.domain.key_ring import KeyEncryptionKey, KeyRing
from services.vault.domain.values import SecretValue

FORMAT_VERSION = 1
NONCE_BYTES = 12
DEK_BITS = 256
_LABEL = b"eventflow.vault"


@dataclass(frozen=True)
class SecretRecord:
    """Where a ciphertext belongs; what its associated data commits to."""

    organization_id: str
    action: str
    key: str
    version: int


@dataclass(frozen=True)
class Sealed:
    """One stored secret version: the wrapped DEK and the value ciphertext."""

    format: int
    kek_version: int
    dek_nonce: bytes
    wrapped_dek: bytes
    value_nonce: bytes
    ciphertext: bytes


class EnvelopeError(Exception):
    """A sealed value that cannot be opened. Carries the record, never a value."""

    def __init__(self, record: SecretRecord, kek_version: int, problem: str) -> None:
        super().__init__(
            f"{problem}: organization {record.organization_id!r} action {record.action!r}"
            f" key {record.key!r} version {record.version} (key version {kek_version})"
        )
        self.record = record
        self.kek_version = kek_version


class IntegrityError(EnvelopeError):
    """Authentication failed: the row was altered, or moved from another record."""


class KeyUnavailable(EnvelopeError):
    """The KEK version that wrapped this DEK is not in the ring."""


def seal(record: SecretRecord, value: SecretValue, kek: KeyEncryptionKey) -> Sealed:
    dek = AESGCM.generate_key(bit_length=DEK_BITS)
    value_nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(dek).encrypt(value_nonce, value.encode(), _value_aad(record))
    dek_nonce, wrapped = _wrap(record, dek, kek)
    return Sealed(FORMAT_VERSION, kek.version, dek_nonce, wrapped, value_nonce, ciphertext)


def open_sealed(record: SecretRecord, sealed: Sealed, ring: KeyRing) -> SecretValue:
    dek = _unwrap(record, sealed, ring)
    try:
        plaintext = AESGCM(dek).decrypt(sealed.value_nonce, sealed.ciphertext, _value_aad(record))
    except (InvalidTag, ValueError):
        raise IntegrityError(record, sealed.kek_version, "value failed authentication") from None
    return SecretValue.decode(plaintext)


def rewrap(record: SecretRecord, sealed: Sealed, ring: KeyRing, to: KeyEncryptionKey) -> Sealed:
    """The same value ciphertext with its DEK wrapped by ``to``; the value stays sealed."""
    dek = _unwrap(record, sealed, ring)
    dek_nonce, wrapped = _wrap(record, dek, to)
    return Sealed(
        sealed.format, to.version, dek_nonce, wrapped, sealed.value_nonce, sealed.ciphertext
    )


def _wrap(record: SecretRecord, dek: bytes, kek: KeyEncryptionKey) -> tuple[bytes, bytes]:
    nonce = os.urandom(NONCE_BYTES)
    return nonce, AESGCM(kek.material).encrypt(nonce, dek, _dek_aad(record, kek.version))


def _unwrap(record: SecretRecord, sealed: Sealed, ring: KeyRing) -> bytes:
    if sealed.format != FORMAT_VERSION:
        raise IntegrityError(record, sealed.kek_version, f"unknown format {sealed.format}")
    kek = ring.get(sealed.kek_version)
    if kek is None:
        raise KeyUnavailable(record, sealed.kek_version, "key version not in the key ring")
    try:
        return AESGCM(kek.material).decrypt(
            sealed.dek_nonce, sealed.wrapped_dek, _dek_aad(record, kek.version)
        )
    except (InvalidTag, ValueError):
        raise IntegrityError(record, sealed.kek_version, "data key failed authentication") from None


def _value_aad(record: SecretRecord) -> bytes:
    return _encode(b"value", FORMAT_VERSION, record)


def _dek_aad(record: SecretRecord, kek_version: int) -> bytes:
    return _encode(b"data-key", FORMAT_VERSION, record, kek_version)


def _encode(purpose: bytes, format_version: int, record: SecretRecord, *extra: int) -> bytes:
    """Length-prefixed fields: no two different records encode alike."""
    fields = [
        _LABEL,
        purpose,
        str(format_version).encode(),
        record.organization_id.encode(),
        record.action.encode(),
        record.key.encode(),
        str(record.version).encode(),
        *(str(n).encode() for n in extra),
    ]
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)
