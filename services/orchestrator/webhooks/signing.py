"""Standard Webhooks signing (https://www.standardwebhooks.com).

We sign exactly what the specification says so receivers can verify with any
Standard Webhooks library instead of code we would have to document: the
HMAC-SHA256 of ``{msg_id}.{timestamp}.{body}`` keyed with the base64-decoded
part of a ``whsec_`` secret, sent as ``v1,<base64>`` in ``webhook-signature``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from typing import Final

__all__ = ["SECRET_PREFIX", "new_secret", "sign", "signature_headers"]

SECRET_PREFIX: Final = "whsec_"
_SECRET_BYTES: Final = 32
# The id travels in a header and inside the signed string: visible ASCII only,
# so it can neither break the header nor be read differently by the receiver.
_MSG_ID: Final = re.compile(r"[\x21-\x7e]{1,256}")


def new_secret() -> str:
    """A fresh per-workflow signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for one delivery attempt."""
    if not _MSG_ID.fullmatch(msg_id):
        raise ValueError("msg_id must be 1-256 visible ASCII characters")
    if timestamp < 0:
        raise ValueError("timestamp must be a non-negative Unix time in seconds")
    signed = f"{msg_id}.{timestamp}.".encode("ascii") + body
    digest = hmac.new(_signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_headers(
    secret: str, msg_id: str, timestamp: int, body: bytes, *also: str
) -> dict[str, str]:
    """The three Standard Webhooks headers for one delivery attempt.

    ``also``: more secrets to sign with (space-separated signatures, as the
    specification allows), so during a rotation's grace period receivers
    holding either the new or the previous secret verify the delivery.
    """
    signatures = [sign(key, msg_id, timestamp, body) for key in (secret, *also)]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signatures),
    }


def _signing_key(secret: str) -> bytes:
    # Messages never quote the secret: they end up in step errors and logs.
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("webhook secret is not whsec_ followed by base64") from None
    if not key:
        raise ValueError("webhook secret is empty")
    return key
