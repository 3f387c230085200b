"""Rules for action names, review decisions and which version runs."""

from __future__ import annotations

import re

from libs.errors import invalid_field

NAME = re.compile(r"[A-Za-z0-9_.\-]{1,120}")
MAX_MODULE_BYTES = 8 * 1024 * 1024
MAX_DESCRIPTION = 1000
MAX_COMMENT = 1000
PENDING, APPROVED, REJECTED = "pending_review", "approved", "rejected"
DECISIONS = (APPROVED, REJECTED)


def validate_name(name: str, field: str = "name") -> str:
    if not NAME.fullmatch(name or ""):
        raise invalid_field(field, "must be 1-120 letters, digits, '_', '-' or '.'")
    return name


def validate_description(text: str) -> str:
    text = text.strip()
    if len(text) > MAX_DESCRIPTION:
        raise invalid_field("description", f"must be at most {MAX_DESCRIPTION} characters")
    return text


def validate_decision(decision: str, comment: str) -> tuple[str, str]:
    if decision not in DECISIONS:
        raise invalid_field("decision", f"must be approved or rejected; got {decision!r}")
    comment = comment.strip()
    if len(comment) > MAX_COMMENT:
        raise invalid_field("comment", f"must be at most {MAX_COMMENT} characters")
    return decision, comment
