"""Execute, Simulate, ValidateModule and ResolveAction: from a request to a typed result.

The envelope a guest receives is ``{payload, secrets, permissions, action}``.
``payload`` is spliced in verbatim (after checking it is a JSON object), and
``secrets`` holds only keys that an approved ``read_secret:`` permission
declares AND that exist: undeclared keys are absent, not empty.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eventflow.executor.v1 import executor_service_pb2 as pb
from opentelemetry import metrics

from libs.errors import invalid_field
from services.executor.catalog import ActionCatalog, Refusal

MAX_PAYLOAD_BYTES = 1024 * 1024

meter = metrics.get_meter("eventflow.executor")
FUEL_USED = meter.create_histogram(
    "eventflow.action.fuel_used",
    unit="{fuel}",
    description="wasmtime fuel one guest run consumed, by call and outcome",
    # Runs are capped at 50M units (SPEC §6); buckets by decades up to the cap.
    explicit_bucket_boundaries_advisory=[10**n for n in range(3, 8)] + [50_000_000],
)


@dataclass(frozen=True)
class GuestRun:
    """One run's outcome, output already checked against the contract."""

    ok: bool
    reason: str = ""
    message: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    projection: dict[str, Any] | None = None
    derived_event: dict[str, Any] | None = None
    fuel_used: int = 0
    duration_us: int = 0
    peak_memory_bytes: int = 0


class Sandbox(Protocol):
    async def validate(self, wasm: bytes) -> str | None:
        """None when the module may be stored, else the reason it is refused."""

    async def run(
        self, sha256: str, load: Callable[[], Awaitable[bytes]], envelope: bytes
    ) -> GuestRun:
        """Run the module with that digest (``load`` fetches its bytes on a cache miss)."""


class ModuleSource(Protocol):
    async def get_module(self, organization_id: str, sha256: str) -> bytes: ...


class SecretSource(Protocol):
    async def secrets_for(
        self, organization_id: str, action: str, keys: list[str]
    ) -> dict[str, str]: ...


class Execution:
    def __init__(
        self,
        catalog: ActionCatalog,
        sandbox: Sandbox,
        modules: ModuleSource,
        secrets: SecretSource,
    ) -> None:
        self._catalog = catalog
        self._sandbox = sandbox
        self._modules = modules
        self._secrets = secrets

    async def execute(self, request: pb.ExecuteRequest) -> pb.RunResult:
        payload = _payload(request.payload_json)
        if not request.organization_id:
            raise invalid_field("organization_id", "is required")
        found = self._catalog.resolve(request.organization_id, request.action, request.version)
        if isinstance(found, Refusal):
            return pb.RunResult(
                ok=False, failure_reason=found.reason, failure_message=found.message
            )
        keys = declared_keys(found.permissions)
        secrets = (
            await self._secrets.secrets_for(request.organization_id, found.name, keys)
            if keys
            else {}
        )
        envelope = build_envelope(payload, secrets, found.permissions, found.name)

        async def load() -> bytes:
            return await self._modules.get_module(request.organization_id, found.sha256)

        run = await self._sandbox.run(found.sha256, load, envelope)
        _record_fuel(run, "execute")
        result = to_proto(run)
        result.action_id, result.version, result.sha256 = (
            found.action_id,
            found.version,
            found.sha256,
        )
        return result

    def resolve(self, request: pb.ResolveActionRequest) -> pb.ResolveActionResponse:
        """What Execute would run for this action, from the same catalog; runs nothing."""
        if not request.organization_id:
            raise invalid_field("organization_id", "is required")
        if not request.action:
            raise invalid_field("action", "is required")
        found = self._catalog.resolve(request.organization_id, request.action, request.version)
        if isinstance(found, Refusal):
            return pb.ResolveActionResponse(
                runnable=False, refusal_reason=found.reason, refusal_message=found.message
            )
        return pb.ResolveActionResponse(
            runnable=True,
            action_id=found.action_id,
            name=found.name,
            version=found.version,
            sha256=found.sha256,
        )

    async def simulate(self, request: pb.SimulateRequest) -> pb.RunResult:
        """Any version, approved or not; only the secrets the request carries."""
        payload = _payload(request.payload_json)
        keys = set(declared_keys(request.permissions))
        secrets = {k: v for k, v in request.secrets.items() if k in keys}
        envelope = build_envelope(payload, secrets, tuple(request.permissions), request.action_name)
        digest = hashlib.sha256(request.wasm).hexdigest()

        async def load() -> bytes:
            return request.wasm

        run = await self._sandbox.run(digest, load, envelope)
        _record_fuel(run, "simulate")
        result = to_proto(run)
        result.sha256 = digest
        return result

    async def validate(self, wasm: bytes) -> pb.ValidateModuleResponse:
        digest = hashlib.sha256(wasm).hexdigest()
        reason = await self._sandbox.validate(wasm)
        return pb.ValidateModuleResponse(valid=reason is None, reason=reason or "", sha256=digest)


def _record_fuel(run: GuestRun, call: str) -> None:
    FUEL_USED.record(run.fuel_used, {"call": call, "outcome": "ok" if run.ok else run.reason})


def declared_keys(permissions: tuple[str, ...] | list[str] | Any) -> list[str]:
    return [p.split(":", 1)[1] for p in permissions if p.startswith("read_secret:")]


def build_envelope(
    payload: bytes, secrets: dict[str, str], permissions: tuple[str, ...], action: str
) -> bytes:
    rest = json.dumps(
        {"secrets": secrets, "permissions": list(permissions), "action": action},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    return b'{"payload":' + payload + b"," + rest[1:]


def to_proto(run: GuestRun) -> pb.RunResult:
    result = pb.RunResult(
        ok=run.ok,
        failure_reason=run.reason,
        failure_message=run.message,
        output_json=json.dumps(run.output, ensure_ascii=False) if run.ok else "",
        fuel_used=run.fuel_used,
        duration_us=run.duration_us,
        peak_memory_bytes=run.peak_memory_bytes,
    )
    if run.projection is not None:
        p = run.projection
        result.projection.CopyFrom(
            pb.Projection(
                name=p["name"],
                entity_type=p.get("entity_type") or "",
                entity_id=str(p.get("entity_id") or ""),
                title=p.get("title") or "",
                status=p.get("status") or "",
                data_json=json.dumps(p.get("data"), ensure_ascii=False),
                keyed=p.get("entity_type") is not None,
            )
        )
    if run.derived_event is not None:
        event = run.derived_event
        result.derived_event.CopyFrom(
            pb.DerivedEvent(
                type=event["type"], payload_json=json.dumps(event["payload"], ensure_ascii=False)
            )
        )
    return result


def _payload(text: str) -> bytes:
    raw = (text or "{}").encode()
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise invalid_field("payload_json", "must be at most 1 MiB")
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        raise invalid_field("payload_json", "is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise invalid_field("payload_json", "must be a JSON object")
    return raw
