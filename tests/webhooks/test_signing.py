"""Our signatures, checked by the reference ``standardwebhooks`` verifier, not by our own code."""

from __future__ import annotations

import base64
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from services.orchestrator.webhooks import new_secret, sign, signature_headers

BODY = b'{"type":"order.paid","data":{"orderId":"o_123","total":4200}}'


def test_new_secret_is_whsec_and_32_random_bytes() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert len({new_secret() for _ in range(50)}) == 50


def test_sign_matches_the_standard_webhooks_reference_vector() -> None:
    # The example from the Standard Webhooks specification.
    signature = sign(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        b'{"test": 2432232314}',
    )
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_signature_headers_verify_with_the_reference_library() -> None:
    secret = new_secret()
    headers = signature_headers(secret, "msg_2mX9", int(time.time()), BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "msg_2mX9"
    assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)


def test_a_tampered_body_fails_verification() -> None:
    secret = new_secret()
    headers = signature_headers(secret, "msg_2mX9", int(time.time()), BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"4200", b"1"), headers)


@pytest.mark.parametrize(
    ("header", "value"), [("webhook-id", "msg_other"), ("webhook-timestamp", "shift")]
)
def test_a_tampered_id_or_timestamp_fails_verification(header: str, value: str) -> None:
    secret = new_secret()
    now = int(time.time())
    headers = signature_headers(secret, "msg_2mX9", now, BODY)
    headers[header] = str(now - 1) if value == "shift" else value
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)


def test_another_secret_fails_verification() -> None:
    headers = signature_headers(new_secret(), "msg_2mX9", int(time.time()), BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)


def test_during_a_rotation_both_the_new_and_the_previous_secret_verify() -> None:
    new, previous = new_secret(), new_secret()
    headers = signature_headers(new, "msg_2mX9", int(time.time()), BODY, previous)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (new, previous):
        assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)


def test_secret_without_prefix_signs_the_same() -> None:
    secret = new_secret()
    bare = secret.removeprefix("whsec_")
    assert sign(secret, "msg_1", 1, BODY) == sign(bare, "msg_1", 1, BODY)


@settings(max_examples=50)
@given(
    msg_id=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64),
    payload=st.dictionaries(st.text(max_size=10), st.integers() | st.text(max_size=20)),
)
def test_any_id_and_json_body_verify(msg_id: str, payload: dict[str, object]) -> None:
    secret = new_secret()
    body = json.dumps(payload, ensure_ascii=False).encode()
    headers = signature_headers(secret, msg_id, int(time.time()), body)
    assert Webhook(secret).verify(body, headers) == payload


@pytest.mark.parametrize("secret", ["whsec_", "whsec_not base64!", "", "whsec_%%%%"])
def test_malformed_secret_is_rejected_without_echoing_it(secret: str) -> None:
    with pytest.raises(ValueError) as error:
        sign(secret, "msg_1", 1, BODY)
    if secret.removeprefix("whsec_"):
        assert secret.removeprefix("whsec_") not in str(error.value)


@pytest.mark.parametrize("msg_id", ["", "msg 1", "msg\r\nx-evil: 1", "msg_é", "m" * 257])
def test_message_ids_that_cannot_travel_in_a_header_are_rejected(msg_id: str) -> None:
    with pytest.raises(ValueError):
        sign(new_secret(), msg_id, 1, BODY)
