"""What a workflow definition may contain, and its normalised form.

``normalize_definition`` takes the JSON form a client sends (SPEC §4 field
names; absent means "use the default") and returns either the complete,
defaults-filled definition or an INVALID_ARGUMENT listing every bad field.
The normalised form is what is stored, hashed and published.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from libs.errors import FieldViolation, invalid_argument

STEP_TYPES = ("webhook", "custom_action", "delay")
ENVIRONMENTS = ("production", "sandbox")
REENTRY_MODES = ("always", "once", "cooldown")
BACKOFFS = ("fixed", "exponential")
WEBHOOK_METHODS = ("POST", "PUT", "PATCH")
# Headers eventflow sets itself on every delivery; a workflow cannot override them.
RESERVED_HEADERS = frozenset(
    {
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "idempotency-key",
        "content-type",
        "content-length",
        "host",
        "transfer-encoding",
        "connection",
    }
)

EVENT_TYPE = re.compile(r"[a-z0-9_.\-]{1,120}")
ACTION_REF = re.compile(r"[A-Za-z0-9_.\-]{1,120}")
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,128}")

MAX_NAME = 200
MAX_STEPS = 100
MAX_HEADERS = 32
MAX_URL = 2048
DELAY_MIN_MS = 1_000
DELAY_MAX_MS = 30 * 24 * 3600 * 1000
COOLDOWN_DEFAULT = 60
COOLDOWN_MAX = 365 * 24 * 60

# The fields each step type accepts besides name, type and retry.
_TYPE_FIELDS = {
    "webhook": {"url", "method", "headers"},
    "custom_action": {"action", "version"},
    "delay": {"duration_ms"},
}
_ALL_TYPE_FIELDS = set().union(*_TYPE_FIELDS.values())


@dataclass(frozen=True)
class RetryDefaults:
    max_attempts: int
    backoff_delay_ms: int
    backoff: str = "exponential"
    timeout_ms: int = 30_000


RETRY_DEFAULTS = {
    "webhook": RetryDefaults(max_attempts=5, backoff_delay_ms=10_000),
    "custom_action": RetryDefaults(max_attempts=3, backoff_delay_ms=5_000),
    "delay": RetryDefaults(max_attempts=3, backoff_delay_ms=5_000),
}
# (low, high) inclusive, per retry field.
RETRY_RANGES = {
    "max_attempts": (1, 10),
    "backoff_delay_ms": (1_000, 300_000),
    "timeout_ms": (5_000, 300_000),
}


class _Violations:
    def __init__(self) -> None:
        self.items: list[FieldViolation] = []

    def add(self, field: str, description: str) -> None:
        self.items.append(FieldViolation(field, description))

    def raise_if_any(self) -> None:
        if self.items:
            raise invalid_argument(self.items)


def normalize_definition(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate a definition and fill in every default; raise on any bad field."""
    v = _Violations()
    definition = {
        "name": _name(raw.get("name"), v),
        "trigger_event": _event_type(raw.get("trigger_event"), "trigger_event", v),
        "environment": _choice(
            raw.get("environment") or "production", ENVIRONMENTS, "environment", v
        ),
        "steps": _steps(raw.get("steps"), v),
        "reentry": _reentry(raw.get("reentry") or {}, v),
    }
    for path in _unencodable(definition):
        v.add(path, "must be valid UTF-8 text (lone surrogates are not)")
    v.raise_if_any()
    return definition


def _unencodable(value: Any, path: str = "") -> list[str]:
    """Paths of text that cannot be encoded as UTF-8, so cannot be hashed or stored."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [path]
        return []
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _unencodable(key):
                found.append(child)
            found.extend(_unencodable(item, child))
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _unencodable(item, f"{path}[{i}]")]
    return []


def validate_event_type(value: Any, field: str) -> str:
    v = _Violations()
    result = _event_type(value, field, v)
    v.raise_if_any()
    return result


def _name(value: Any, v: _Violations) -> str:
    name = (value or "").strip() if isinstance(value, str) else ""
    if not name:
        v.add("name", "is required")
    elif len(name) > MAX_NAME:
        v.add("name", f"must be at most {MAX_NAME} characters, got {len(name)}")
    return name


def _event_type(value: Any, field: str, v: _Violations) -> str:
    text = value if isinstance(value, str) else ""
    if not text:
        v.add(field, "is required")
    elif not EVENT_TYPE.fullmatch(text):
        v.add(field, "must be 1-120 characters of lowercase letters, digits, '_', '-' or '.'")
    return text


def _choice(value: Any, allowed: tuple[str, ...], field: str, v: _Violations) -> str:
    if value not in allowed:
        v.add(field, f"must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def _int_in(value: Any, low: int, high: int, field: str, v: _Violations) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        v.add(field, f"must be an integer between {low} and {high}")
        return None
    if not low <= value <= high:
        v.add(field, f"must be between {low} and {high}, got {value}")
    return value


def _steps(value: Any, v: _Violations) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        v.add("steps", "at least one step is required")
        return []
    if len(value) > MAX_STEPS:
        v.add("steps", f"at most {MAX_STEPS} steps, got {len(value)}")
    steps = [_step(raw, f"steps[{i}]", v) for i, raw in enumerate(value)]
    seen: dict[str, int] = {}
    for i, step in enumerate(steps):
        name = step.get("name")
        if name and name in seen:
            v.add(f"steps[{i}].name", f"duplicates the name of steps[{seen[name]}]")
        elif name:
            seen[name] = i
    return steps


def _step(raw: Any, path: str, v: _Violations) -> dict[str, Any]:
    if not isinstance(raw, dict):
        v.add(path, "must be an object")
        return {}
    step_type = raw.get("type") or ""
    if step_type not in STEP_TYPES:
        v.add(
            f"{path}.type",
            f"unsupported step type: {step_type}"
            if step_type
            else "is required (webhook, custom_action or delay)",
        )
        return {"type": step_type}
    name = raw.get("name") or ""
    if not isinstance(name, str) or len(name) > MAX_NAME:
        v.add(f"{path}.name", f"must be text of at most {MAX_NAME} characters")
    for extra in sorted((_ALL_TYPE_FIELDS - _TYPE_FIELDS[step_type]) & _present(raw)):
        v.add(f"{path}.{extra}", f"does not apply to {step_type} steps")
    step: dict[str, Any] = {"type": step_type, "name": name}
    if step_type == "webhook":
        step.update(_webhook(raw, path, v))
    elif step_type == "custom_action":
        step.update(_custom_action(raw, path, v))
    elif raw.get("duration_ms") is None:
        v.add(f"{path}.duration_ms", "is required for delay steps")
    else:
        step["duration_ms"] = _int_in(
            raw["duration_ms"], DELAY_MIN_MS, DELAY_MAX_MS, f"{path}.duration_ms", v
        )
    step["retry"] = _retry(raw.get("retry") or {}, RETRY_DEFAULTS[step_type], f"{path}.retry", v)
    return step


def _present(raw: dict[str, Any]) -> set[str]:
    """Fields the client actually set (empty strings and maps count as unset)."""
    return {k for k, value in raw.items() if value not in (None, "", {}, [])}


def _webhook(raw: dict[str, Any], path: str, v: _Violations) -> dict[str, Any]:
    url = raw.get("url") or ""
    if not url:
        v.add(f"{path}.url", "is required for webhook steps")
    elif len(url) > MAX_URL:
        v.add(f"{path}.url", f"must be at most {MAX_URL} characters")
    else:
        problem = _url_problem(url)
        if problem:
            v.add(f"{path}.url", problem)
    method = (raw.get("method") or "POST").upper()
    if method not in WEBHOOK_METHODS:
        v.add(f"{path}.method", f"must be one of {', '.join(WEBHOOK_METHODS)}; got {method!r}")
    headers = raw.get("headers") or {}
    if len(headers) > MAX_HEADERS:
        v.add(f"{path}.headers", f"at most {MAX_HEADERS} headers")
    for key, value in headers.items():
        field = f"{path}.headers[{key!r}]"
        if not HEADER_NAME.fullmatch(key):
            v.add(field, "is not a valid header name")
        elif key.lower() in RESERVED_HEADERS:
            v.add(field, "is set by eventflow on every delivery and cannot be overridden")
        elif "\r" in value or "\n" in value:
            v.add(field, "must not contain line breaks")
    return {"url": url, "method": method, "headers": dict(sorted(headers.items()))}


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not 0-65535
    except ValueError as error:
        return f"is not a valid URL ({error})"
    if parts.scheme not in ("http", "https"):
        return "must be an http or https URL"
    if not parts.hostname:
        return "must name a host"
    if parts.username or parts.password:
        return "must not carry credentials; use headers instead"
    return None


def _custom_action(raw: dict[str, Any], path: str, v: _Violations) -> dict[str, Any]:
    action = raw.get("action") or ""
    if not action:
        v.add(f"{path}.action", "is required for custom_action steps")
    elif not ACTION_REF.fullmatch(action):
        v.add(f"{path}.action", "must be an action id or key (letters, digits, '_', '-', '.')")
    step: dict[str, Any] = {"action": action}
    if raw.get("version") is not None:
        step["version"] = _int_in(raw["version"], 1, 2**31 - 1, f"{path}.version", v)
    return step


def _retry(raw: Any, defaults: RetryDefaults, path: str, v: _Violations) -> dict[str, Any]:
    if not isinstance(raw, dict):
        v.add(path, "must be an object")
        raw = {}
    retry: dict[str, Any] = {}
    for field, (low, high) in RETRY_RANGES.items():
        value = raw.get(field)
        retry[field] = (
            getattr(defaults, field)
            if value is None
            else _int_in(value, low, high, f"{path}.{field}", v)
        )
    retry["backoff"] = _choice(
        raw.get("backoff") or defaults.backoff, BACKOFFS, f"{path}.backoff", v
    )
    return retry


def _reentry(raw: Any, v: _Violations) -> dict[str, Any]:
    if not isinstance(raw, dict):
        v.add("reentry", "must be an object")
        raw = {}
    mode = _choice(raw.get("mode") or "always", REENTRY_MODES, "reentry.mode", v)
    minutes = raw.get("cooldown_minutes")
    if minutes is None:
        minutes = COOLDOWN_DEFAULT
    else:
        minutes = _int_in(minutes, 1, COOLDOWN_MAX, "reentry.cooldown_minutes", v)
    return {"mode": mode, "cooldown_minutes": minutes}


def referenced_actions(definition: dict[str, Any]) -> list[str]:
    """The action references of a definition's custom_action steps, in order."""
    return [s["action"] for s in definition.get("steps", []) if s.get("type") == "custom_action"]
