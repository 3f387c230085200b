"""Webhook signing secrets (SPEC §4): their form and the rotation grace period.

A secret is ``whsec_`` followed by the standard base64 of 32 random bytes,
the form Standard Webhooks libraries accept. After a rotation the previous
secret stays valid for ``GRACE_PERIOD``; deliveries are signed with every
valid secret, so a receiver still holding the old one keeps verifying until
it has switched.
"""

from __future__ import annotations

import base64
import secrets
from datetime import datetime, timedelta

PREFIX = "whsec_"
SECRET_BYTES = 32
GRACE_PERIOD = timedelta(hours=24)


def new_signing_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def valid_secrets(
    secret: str, previous: str | None, rotate_time: datetime | None, now: datetime
) -> list[str]:
    """The secrets a delivery is signed with at ``now``: current first."""
    if previous and rotate_time is not None and now - rotate_time < GRACE_PERIOD:
        return [secret, previous]
    return [secret]
