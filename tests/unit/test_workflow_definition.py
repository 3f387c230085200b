"""SPEC §4: what a workflow definition may contain, and the defaults it gets."""

from __future__ import annotations

from typing import Any, Literal

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.errors import EventflowError
from services.registry.domain.canonical import definition_hash
from services.registry.domain.definition import RESERVED_HEADERS, normalize_definition

THIRTY_DAYS_MS = 30 * 24 * 60 * 60 * 1000


def webhook(**fields: Any) -> dict[str, Any]:
    return {"type": "webhook", "url": "https://hooks.example.com/orders", **fields}


def action(**fields: Any) -> dict[str, Any]:
    return {"type": "custom_action", "action": "enrich-order", **fields}


def delay(**fields: Any) -> dict[str, Any]:
    return {"type": "delay", "duration_ms": 60_000, **fields}


def definition(*steps: dict[str, Any], **fields: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "Order follow-up",
        "trigger_event": "order.created",
        "steps": list(steps) or [delay()],
    }
    raw.update(fields)
    return raw


def rejection(raw: dict[str, Any]) -> EventflowError:
    with pytest.raises(EventflowError) as caught:
        normalize_definition(raw)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    return caught.value


def violated_fields(raw: dict[str, Any]) -> list[str]:
    return [v.field for v in rejection(raw).violations]


def only_violation(raw: dict[str, Any], field: str) -> str:
    """The description of the single violation, which must name ``field``."""
    violations = rejection(raw).violations
    assert [v.field for v in violations] == [field]
    return violations[0].description


def normalized_step(step: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = normalize_definition(definition(step))["steps"][0]
    return result


# --- name -------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, "", "   ", "\t\n"])
def test_name_is_required(name: str | None) -> None:
    raw = definition()
    if name is None:
        del raw["name"]
    else:
        raw["name"] = name
    assert only_violation(raw, "name") == "is required"


def test_name_is_trimmed() -> None:
    assert normalize_definition(definition(name="  Order follow-up \n"))["name"] == (
        "Order follow-up"
    )


def test_name_of_200_characters_is_accepted() -> None:
    assert normalize_definition(definition(name="n" * 200))["name"] == "n" * 200


def test_name_limit_applies_after_trimming() -> None:
    assert normalize_definition(definition(name=f"  {'n' * 200}  "))["name"] == "n" * 200


def test_name_of_201_characters_is_rejected() -> None:
    assert "200" in only_violation(definition(name="n" * 201), "name")


# --- trigger_event ----------------------------------------------------------


@pytest.mark.parametrize(
    "event_type", ["order.created", "a", "user_signed-up.v2", "2024.invoice", "x" * 120]
)
def test_trigger_event_accepts_lowercase_letters_digits_and_underscore_dash_dot(
    event_type: str,
) -> None:
    assert normalize_definition(definition(trigger_event=event_type))["trigger_event"] == (
        event_type
    )


@pytest.mark.parametrize("event_type", [None, ""])
def test_trigger_event_is_required(event_type: str | None) -> None:
    raw = definition(trigger_event=event_type)
    assert only_violation(raw, "trigger_event") == "is required"


@pytest.mark.parametrize(
    "event_type",
    ["Order.Created", "order created", "order/created", "order:created", "ordér", "x" * 121],
)
def test_trigger_event_outside_the_charset_or_over_120_characters_is_rejected(
    event_type: str,
) -> None:
    assert violated_fields(definition(trigger_event=event_type)) == ["trigger_event"]


def test_trigger_event_with_a_trailing_newline_is_rejected() -> None:
    # "\n" is not in the event-type charset; 'order.created\n' must not be stored as a trigger.
    assert violated_fields(definition(trigger_event="order.created\n")) == ["trigger_event"]


# --- environment ------------------------------------------------------------


def test_environment_defaults_to_production() -> None:
    assert normalize_definition(definition())["environment"] == "production"
    assert normalize_definition(definition(environment=""))["environment"] == "production"


def test_sandbox_environment_is_accepted() -> None:
    assert normalize_definition(definition(environment="sandbox"))["environment"] == "sandbox"


@pytest.mark.parametrize("environment", ["staging", "Production", "SANDBOX", "prod"])
def test_unknown_environment_is_rejected(environment: str) -> None:
    assert violated_fields(definition(environment=environment)) == ["environment"]


# --- steps ------------------------------------------------------------------


@pytest.mark.parametrize("steps", [None, []])
def test_at_least_one_step_is_required(steps: list[Any] | None) -> None:
    raw = definition()
    raw["steps"] = steps
    assert violated_fields(raw) == ["steps"]


def test_a_step_must_be_an_object() -> None:
    raw = definition()
    raw["steps"] = [delay(), "webhook"]
    assert violated_fields(raw) == ["steps[1]"]


def test_the_three_step_types_are_accepted_in_order() -> None:
    normalized = normalize_definition(definition(webhook(), action(), delay()))
    assert [s["type"] for s in normalized["steps"]] == ["webhook", "custom_action", "delay"]


@pytest.mark.parametrize("step_type", ["email", "sms", "Webhook", "DELAY", "http", "wait"])
def test_any_other_step_type_is_rejected_naming_the_step(step_type: str) -> None:
    raw = definition(webhook(), delay(), {"type": step_type})
    assert only_violation(raw, "steps[2].type") == f"unsupported step type: {step_type}"


def test_step_type_is_required() -> None:
    assert violated_fields(definition({"name": "untyped"})) == ["steps[0].type"]


# --- webhook steps ----------------------------------------------------------


def test_webhook_url_is_required() -> None:
    assert violated_fields(definition({"type": "webhook"})) == ["steps[0].url"]


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/orders",
        "http://hooks.example.com",
        "https://hooks.example.com:8443/in?source=eventflow#frag",
        "http://[2001:db8::1]:8080/hook",
        "http://10.0.0.7/internal",
    ],
)
def test_webhook_accepts_http_and_https_urls(url: str) -> None:
    assert normalized_step(webhook(url=url))["url"] == url


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/orders",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "hooks.example.com/orders",
        "//hooks.example.com/orders",
        "mailto:ops@example.com",
    ],
)
def test_webhook_rejects_other_schemes(url: str) -> None:
    assert "http" in only_violation(definition(webhook(url=url)), "steps[0].url")


@pytest.mark.parametrize("url", ["https:///orders", "http://", "https://:443/orders"])
def test_webhook_url_must_name_a_host(url: str) -> None:
    assert only_violation(definition(webhook(url=url)), "steps[0].url") == "must name a host"


@pytest.mark.parametrize(
    "url",
    [
        "https://user:secret@hooks.example.com/orders",
        "https://token@hooks.example.com/orders",
        "https://:secret@hooks.example.com/orders",
    ],
)
def test_webhook_url_must_not_carry_credentials(url: str) -> None:
    assert "credentials" in only_violation(definition(webhook(url=url)), "steps[0].url")


@pytest.mark.parametrize("url", ["http://[::1/hook", "https://[hooks.example.com/x"])
def test_malformed_webhook_url_is_a_field_violation_not_a_crash(url: str) -> None:
    # An unbalanced IPv6 bracket must come back as INVALID_ARGUMENT on the url,
    # not as an unhandled ValueError from urllib.
    assert violated_fields(definition(webhook(url=url))) == ["steps[0].url"]


@pytest.mark.parametrize(
    "url", ["https://hooks.example.com:99999/orders", "https://hooks.example.com:http/orders"]
)
def test_webhook_url_with_an_invalid_port_is_rejected(url: str) -> None:
    assert violated_fields(definition(webhook(url=url))) == ["steps[0].url"]


def test_webhook_method_defaults_to_post() -> None:
    assert normalized_step(webhook())["method"] == "POST"


@pytest.mark.parametrize(
    ("method", "expected"), [("POST", "POST"), ("PUT", "PUT"), ("PATCH", "PATCH"), ("put", "PUT")]
)
def test_webhook_method_may_be_post_put_or_patch(method: str, expected: str) -> None:
    assert normalized_step(webhook(method=method))["method"] == expected


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD", "OPTIONS", "CONNECT", "FETCH"])
def test_other_webhook_methods_are_rejected(method: str) -> None:
    assert violated_fields(definition(webhook(method=method))) == ["steps[0].method"]


def test_webhook_custom_headers_are_kept() -> None:
    headers = {"X-Tenant": "acme", "Authorization": "Bearer abc"}
    assert normalized_step(webhook(headers=headers))["headers"] == headers


def test_webhook_headers_default_to_none() -> None:
    assert normalized_step(webhook())["headers"] == {}


@pytest.mark.parametrize("header", sorted(RESERVED_HEADERS))
def test_headers_eventflow_sets_itself_cannot_be_overridden(header: str) -> None:
    raw = definition(webhook(headers={header: "forged"}))
    assert violated_fields(raw) == [f"steps[0].headers[{header!r}]"]


@pytest.mark.parametrize("header", ["Webhook-Signature", "CONTENT-TYPE", "Idempotency-Key"])
def test_reserved_headers_are_matched_case_insensitively(header: str) -> None:
    raw = definition(webhook(headers={header: "forged"}))
    assert violated_fields(raw) == [f"steps[0].headers[{header!r}]"]


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "line\nbreak", "cr\r"])
def test_header_values_must_not_contain_line_breaks(value: str) -> None:
    raw = definition(webhook(headers={"X-Note": value}))
    assert violated_fields(raw) == ["steps[0].headers['X-Note']"]


@pytest.mark.parametrize("name", ["X Bad", "X:Colon", "", "X-Ünicode"])
def test_header_names_must_be_http_tokens(name: str) -> None:
    raw = definition(webhook(headers={name: "v"}))
    assert violated_fields(raw) == [f"steps[0].headers[{name!r}]"]


def test_header_name_with_a_trailing_newline_is_rejected() -> None:
    # A header *name* ending in "\n" is as much an injection vector as a value with one.
    raw = definition(webhook(headers={"X-Tenant\n": "acme"}))
    assert violated_fields(raw) == ["steps[0].headers['X-Tenant\\n']"]


# --- fields that belong to another step type ---------------------------------


@pytest.mark.parametrize(
    ("step", "field"),
    [
        (delay(url="https://hooks.example.com"), "url"),
        (delay(method="POST"), "method"),
        (delay(headers={"X-A": "b"}), "headers"),
        (delay(action="enrich-order"), "action"),
        (delay(version=2), "version"),
        (webhook(action="enrich-order"), "action"),
        (webhook(version=1), "version"),
        (webhook(duration_ms=5_000), "duration_ms"),
        (action(url="https://hooks.example.com"), "url"),
        (action(method="PUT"), "method"),
        (action(duration_ms=5_000), "duration_ms"),
    ],
)
def test_fields_of_another_step_type_are_rejected_naming_the_field(
    step: dict[str, Any], field: str
) -> None:
    description = only_violation(definition(step), f"steps[0].{field}")
    assert description == f"does not apply to {step['type']} steps"


def test_empty_fields_of_another_step_type_count_as_unset() -> None:
    step = normalized_step(delay(url="", headers={}, action=""))
    assert "url" not in step
    assert "action" not in step


# --- custom_action steps ----------------------------------------------------


def test_custom_action_needs_an_action() -> None:
    assert violated_fields(definition({"type": "custom_action"})) == ["steps[0].action"]


@pytest.mark.parametrize("ref", ["enrich-order", "ENRICH_v2", "act.ions", "0b6f2c9a"])
def test_custom_action_accepts_an_action_id_or_key(ref: str) -> None:
    assert normalized_step(action(action=ref))["action"] == ref


@pytest.mark.parametrize("ref", ["enrich order", "enrich/order", "a" * 121])
def test_custom_action_rejects_a_malformed_action_reference(ref: str) -> None:
    assert violated_fields(definition(action(action=ref))) == ["steps[0].action"]


def test_action_reference_with_a_trailing_newline_is_rejected() -> None:
    assert violated_fields(definition(action(action="enrich-order\n"))) == ["steps[0].action"]


def test_custom_action_version_is_optional() -> None:
    assert "version" not in normalized_step(action())


@pytest.mark.parametrize("version", [1, 7, 2**31 - 1])
def test_custom_action_may_pin_a_version(version: int) -> None:
    assert normalized_step(action(version=version))["version"] == version


@pytest.mark.parametrize("version", [0, -1, "3", 1.5, True])
def test_pinned_version_must_be_a_positive_integer(version: Any) -> None:
    assert violated_fields(definition(action(version=version))) == ["steps[0].version"]


# --- delay steps ------------------------------------------------------------


def test_delay_needs_a_duration() -> None:
    assert violated_fields(definition({"type": "delay"})) == ["steps[0].duration_ms"]


@pytest.mark.parametrize("duration_ms", [1_000, 60_000, THIRTY_DAYS_MS])
def test_delay_accepts_one_second_to_thirty_days(duration_ms: int) -> None:
    assert normalized_step(delay(duration_ms=duration_ms))["duration_ms"] == duration_ms


@pytest.mark.parametrize("duration_ms", [0, 999, -1_000, THIRTY_DAYS_MS + 1, "60s", 1500.0])
def test_delay_outside_one_second_to_thirty_days_is_rejected(duration_ms: Any) -> None:
    assert violated_fields(definition(delay(duration_ms=duration_ms))) == ["steps[0].duration_ms"]


# --- retry policy -----------------------------------------------------------


@pytest.mark.parametrize("step", [action(), delay()], ids=["custom_action", "delay"])
def test_retry_policy_defaults(step: dict[str, Any]) -> None:
    assert normalized_step(step)["retry"] == {
        "max_attempts": 3,
        "backoff": "exponential",
        "backoff_delay_ms": 5_000,
        "timeout_ms": 30_000,
    }


def test_webhook_steps_default_to_five_attempts_ten_seconds_apart() -> None:
    assert normalized_step(webhook())["retry"] == {
        "max_attempts": 5,
        "backoff": "exponential",
        "backoff_delay_ms": 10_000,
        "timeout_ms": 30_000,
    }


def test_retry_fields_left_out_keep_the_step_type_default() -> None:
    retry = normalized_step(webhook(retry={"max_attempts": 2, "backoff": "fixed"}))["retry"]
    assert retry == {
        "max_attempts": 2,
        "backoff": "fixed",
        "backoff_delay_ms": 10_000,
        "timeout_ms": 30_000,
    }


def test_explicit_retry_policy_is_kept() -> None:
    policy = {
        "max_attempts": 10,
        "backoff": "fixed",
        "backoff_delay_ms": 300_000,
        "timeout_ms": 5_000,
    }
    assert normalized_step(action(retry=policy))["retry"] == policy


RETRY_RANGES = [
    ("max_attempts", 1, 10),
    ("backoff_delay_ms", 1_000, 300_000),
    ("timeout_ms", 5_000, 300_000),
]


@pytest.mark.parametrize(("field", "low", "high"), RETRY_RANGES)
def test_retry_values_at_the_limits_are_accepted(field: str, low: int, high: int) -> None:
    for value in (low, high):
        assert normalized_step(delay(retry={field: value}))["retry"][field] == value


@pytest.mark.parametrize(("field", "low", "high"), RETRY_RANGES)
def test_retry_values_one_past_the_limits_are_rejected_naming_the_field(
    field: str, low: int, high: int
) -> None:
    for value in (low - 1, high + 1):
        raw = definition(delay(), webhook(retry={field: value}))
        description = only_violation(raw, f"steps[1].retry.{field}")
        assert str(low) in description
        assert str(high) in description


@pytest.mark.parametrize("field", ["max_attempts", "backoff_delay_ms", "timeout_ms"])
def test_retry_values_must_be_integers(field: str) -> None:
    for value in ("3", 3.0, True):
        raw = definition(action(retry={field: value}))
        assert violated_fields(raw) == [f"steps[0].retry.{field}"]


@pytest.mark.parametrize("backoff", ["linear", "Exponential", "none"])
def test_backoff_is_fixed_or_exponential(backoff: str) -> None:
    assert violated_fields(definition(action(retry={"backoff": backoff}))) == [
        "steps[0].retry.backoff"
    ]


def test_retry_must_be_an_object() -> None:
    assert violated_fields(definition(action(retry="3 times"))) == ["steps[0].retry"]


# --- re-entry ---------------------------------------------------------------


def test_reentry_defaults_to_always_with_a_sixty_minute_cooldown() -> None:
    assert normalize_definition(definition())["reentry"] == {
        "mode": "always",
        "cooldown_minutes": 60,
    }


@pytest.mark.parametrize("mode", ["always", "once", "cooldown"])
def test_reentry_modes(mode: str) -> None:
    reentry = normalize_definition(definition(reentry={"mode": mode}))["reentry"]
    assert reentry == {"mode": mode, "cooldown_minutes": 60}


def test_cooldown_minutes_can_be_set() -> None:
    reentry = {"mode": "cooldown", "cooldown_minutes": 15}
    assert normalize_definition(definition(reentry=reentry))["reentry"] == reentry


@pytest.mark.parametrize("mode", ["never", "ONCE", "throttle"])
def test_unknown_reentry_mode_is_rejected(mode: str) -> None:
    assert violated_fields(definition(reentry={"mode": mode})) == ["reentry.mode"]


@pytest.mark.parametrize("minutes", [0, -5, "60"])
def test_cooldown_minutes_must_be_a_positive_integer(minutes: Any) -> None:
    raw = definition(reentry={"mode": "cooldown", "cooldown_minutes": minutes})
    assert violated_fields(raw) == ["reentry.cooldown_minutes"]


# --- step names -------------------------------------------------------------


def test_step_names_are_kept() -> None:
    assert normalized_step(delay(name="wait a minute"))["name"] == "wait a minute"


def test_duplicate_step_names_are_rejected() -> None:
    raw = definition(webhook(name="notify"), delay(name="wait"), webhook(name="notify"))
    description = only_violation(raw, "steps[2].name")
    assert "steps[0]" in description


def test_unnamed_steps_are_not_duplicates() -> None:
    normalized = normalize_definition(definition(delay(), delay(), delay(name="")))
    assert [s["name"] for s in normalized["steps"]] == ["", "", ""]


def test_step_name_is_at_most_200_characters() -> None:
    assert normalized_step(delay(name="s" * 200))["name"] == "s" * 200
    assert violated_fields(definition(delay(name="s" * 201))) == ["steps[0].name"]


# --- all at once ------------------------------------------------------------


def test_every_violation_is_reported_at_once() -> None:
    raw = {
        "name": "",
        "trigger_event": "Order Created",
        "environment": "staging",
        "steps": [
            {"type": "email"},
            {"type": "webhook", "url": "ftp://x.example.com", "method": "GET"},
            {"type": "delay", "duration_ms": 10, "retry": {"max_attempts": 0, "backoff": "x"}},
            {"type": "custom_action", "url": "https://hooks.example.com"},
        ],
        "reentry": {"mode": "sometimes", "cooldown_minutes": 0},
    }
    error = rejection(raw)
    assert {v.field for v in error.violations} == {
        "name",
        "trigger_event",
        "environment",
        "steps[0].type",
        "steps[1].url",
        "steps[1].method",
        "steps[2].duration_ms",
        "steps[2].retry.max_attempts",
        "steps[2].retry.backoff",
        "steps[3].url",
        "steps[3].action",
        "reentry.mode",
        "reentry.cooldown_minutes",
    }
    assert error.reason == "INVALID_ARGUMENT"
    for violation in error.violations:
        assert violation.field in error.message


def test_a_valid_definition_is_returned_complete() -> None:
    raw = definition(
        webhook(name="notify", headers={"X-Tenant": "acme"}),
        action(version=2),
        delay(duration_ms=3_600_000),
        environment="sandbox",
        reentry={"mode": "once"},
    )
    assert normalize_definition(raw) == {
        "name": "Order follow-up",
        "trigger_event": "order.created",
        "environment": "sandbox",
        "steps": [
            {
                "type": "webhook",
                "name": "notify",
                "url": "https://hooks.example.com/orders",
                "method": "POST",
                "headers": {"X-Tenant": "acme"},
                "retry": {
                    "max_attempts": 5,
                    "backoff": "exponential",
                    "backoff_delay_ms": 10_000,
                    "timeout_ms": 30_000,
                },
            },
            {
                "type": "custom_action",
                "name": "",
                "action": "enrich-order",
                "version": 2,
                "retry": {
                    "max_attempts": 3,
                    "backoff": "exponential",
                    "backoff_delay_ms": 5_000,
                    "timeout_ms": 30_000,
                },
            },
            {
                "type": "delay",
                "name": "",
                "duration_ms": 3_600_000,
                "retry": {
                    "max_attempts": 3,
                    "backoff": "exponential",
                    "backoff_delay_ms": 5_000,
                    "timeout_ms": 30_000,
                },
            },
        ],
        "reentry": {"mode": "once", "cooldown_minutes": 60},
    }


# --- idempotence ------------------------------------------------------------

retry_policies = st.fixed_dictionaries(
    {},
    optional={
        "max_attempts": st.integers(1, 10),
        "backoff": st.sampled_from(["fixed", "exponential"]),
        "backoff_delay_ms": st.integers(1_000, 300_000),
        "timeout_ms": st.integers(5_000, 300_000),
    },
)
urls = st.builds(
    "{}://{}/{}".format,
    st.sampled_from(["http", "https"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,15}(\.[a-z]{2,6}){1,2}(:[1-9][0-9]{0,3})?", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9/_.~-]{0,20}", fullmatch=True),
)
# Valid definitions hold UTF-8-encodable text only (no lone surrogates, category Cs).
NO_SURROGATES: list[Literal["Cs"]] = ["Cs"]
utf8_text = st.characters(exclude_categories=NO_SURROGATES)
header_values = st.text(
    st.characters(exclude_characters="\r\n", exclude_categories=NO_SURROGATES), max_size=20
)
webhook_steps = st.fixed_dictionaries(
    {"type": st.just("webhook"), "url": urls},
    optional={
        "method": st.sampled_from(["POST", "PUT", "PATCH", "post", "Patch"]),
        "headers": st.dictionaries(
            st.from_regex(r"X-[A-Za-z0-9-]{1,20}", fullmatch=True), header_values, max_size=4
        ),
        "retry": retry_policies,
    },
)
action_steps = st.fixed_dictionaries(
    {
        "type": st.just("custom_action"),
        "action": st.from_regex(r"[A-Za-z0-9_.-]{1,120}", fullmatch=True),
    },
    optional={"version": st.integers(1, 2**31 - 1), "retry": retry_policies},
)
delay_steps = st.fixed_dictionaries(
    {"type": st.just("delay"), "duration_ms": st.integers(1_000, THIRTY_DAYS_MS)},
    optional={"retry": retry_policies},
)


@st.composite
def valid_definitions(draw: st.DrawFn) -> dict[str, Any]:
    steps = draw(st.lists(st.one_of(webhook_steps, action_steps, delay_steps), min_size=1))
    for i, step in enumerate(steps):
        if draw(st.booleans()):
            step["name"] = f"{draw(st.text(utf8_text, max_size=20))}#{i}"  # unique by construction
    raw: dict[str, Any] = {
        "name": draw(st.text(utf8_text, min_size=1, max_size=200).filter(str.strip)),
        "trigger_event": draw(st.from_regex(r"[a-z0-9_.-]{1,120}", fullmatch=True)),
        "steps": steps,
    }
    if draw(st.booleans()):
        raw["environment"] = draw(st.sampled_from(["production", "sandbox"]))
    if draw(st.booleans()):
        raw["reentry"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "mode": st.sampled_from(["always", "once", "cooldown"]),
                    "cooldown_minutes": st.integers(1, 7 * 24 * 60),
                },
            )
        )
    return raw


@settings(max_examples=200, deadline=None)
@given(valid_definitions())
def test_normalising_a_normalised_definition_changes_nothing(raw: dict[str, Any]) -> None:
    once = normalize_definition(raw)
    twice = normalize_definition(once)
    assert twice == once
    assert definition_hash(twice) == definition_hash(once)


def test_text_that_is_not_valid_utf8_is_refused_naming_the_field() -> None:
    raw = {
        "name": "ok",
        "trigger_event": "a.b",
        "steps": [
            {"type": "webhook", "url": "https://x.example.com", "headers": {"X-A": "\ud800"}}
        ],
    }
    with pytest.raises(EventflowError) as caught:
        normalize_definition(raw)
    assert [v.field for v in caught.value.violations] == ["steps[0].headers.X-A"]
