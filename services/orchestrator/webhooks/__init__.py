"""Webhook steps: Standard Webhooks signing, delivery, and the egress guard (SPEC §4, §9)."""

from __future__ import annotations

from services.orchestrator.webhooks.delivery import (
    MAX_REDIRECTS,
    MAX_RESPONSE_BYTES,
    MAX_RETRY_AFTER_S,
    USER_AGENT,
    DeliveryResult,
    WebhookClient,
    WebhookRequest,
    deliver,
    parse_retry_after,
)
from services.orchestrator.webhooks.egress import (
    DEFAULT_POLICY,
    METADATA_ADDRESSES,
    EgressPolicy,
    EgressRefused,
    VettingResolver,
    blocked_reason,
    check_url,
    egress_middleware,
)
from services.orchestrator.webhooks.signing import (
    SECRET_PREFIX,
    new_secret,
    sign,
    signature_headers,
)

__all__ = [
    "DEFAULT_POLICY",
    "MAX_REDIRECTS",
    "MAX_RESPONSE_BYTES",
    "MAX_RETRY_AFTER_S",
    "METADATA_ADDRESSES",
    "SECRET_PREFIX",
    "USER_AGENT",
    "DeliveryResult",
    "EgressPolicy",
    "EgressRefused",
    "VettingResolver",
    "WebhookClient",
    "WebhookRequest",
    "blocked_reason",
    "check_url",
    "deliver",
    "egress_middleware",
    "new_secret",
    "parse_retry_after",
    "sign",
    "signature_headers",
]
