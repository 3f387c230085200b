"""SPEC §4: webhook signing secrets and the 24-hour grace period after a rotation."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from services.registry.domain.webhook_secrets import new_signing_secret, valid_secrets

NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)


def test_a_secret_is_whsec_and_the_base64_of_32_random_bytes() -> None:
    first, second = new_signing_secret(), new_signing_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"), validate=True)) == 32


def test_without_a_rotation_only_the_current_secret_signs() -> None:
    assert valid_secrets("whsec_a", None, None, NOW) == ["whsec_a"]


def test_the_previous_secret_signs_too_during_the_grace_period() -> None:
    rotated = NOW - timedelta(hours=23, minutes=59)
    assert valid_secrets("whsec_b", "whsec_a", rotated, NOW) == ["whsec_b", "whsec_a"]


def test_the_previous_secret_expires_24_hours_after_the_rotation() -> None:
    rotated = NOW - timedelta(hours=24)
    assert valid_secrets("whsec_b", "whsec_a", rotated, NOW) == ["whsec_b"]
