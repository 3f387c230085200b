"""Optional ed25519 signatures over a module's SHA-256 (lowercase hex text)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from services.governance import errors


@dataclass(frozen=True)
class SignatureCheck:
    status: str  # verified | unverified
    key_fingerprint: str


UNSIGNED = SignatureCheck("unverified", "")


def check_signature(signature_json: str, sha256_hex: str) -> SignatureCheck:
    """Verify a signature if one is given; a signature that fails is an error."""
    if not signature_json.strip():
        return UNSIGNED
    try:
        document = json.loads(signature_json)
    except json.JSONDecodeError as error:
        raise errors.signature_invalid(f"is not valid JSON: {error.msg}") from None
    if not isinstance(document, dict):
        raise errors.signature_invalid("must be a JSON object {alg, public_key, signature}")
    if document.get("alg") != "ed25519":
        raise errors.signature_invalid("alg must be ed25519")
    public_key = _base64(document.get("public_key"), "public_key")
    signature = _base64(document.get("signature"), "signature")
    if len(public_key) != 32:
        raise errors.signature_invalid("public_key must be a 32-byte ed25519 key")
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, sha256_hex.encode())
    except (InvalidSignature, ValueError):
        raise errors.signature_invalid(
            "does not verify: it must sign the module's SHA-256 as lowercase hex text"
        ) from None
    return SignatureCheck("verified", f"ed25519:{hashlib.sha256(public_key).hexdigest()}")


def _base64(value: object, name: str) -> bytes:
    if not isinstance(value, str) or not value:
        raise errors.signature_invalid(f"{name} is required (base64)")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise errors.signature_invalid(f"{name} is not valid base64") from None
