"""Custom actions in governance over real gRPC (SPEC §5): upload, versions,
signatures, review, kill switch, usages, deletion, simulation."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from eventflow.governance.v1 import action_service_pb2 as api

from tests.conftest import make_tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import (
    ECHO,
    IMPORTS_A_FUNCTION,
    NO_MEMORY,
    constant,
    variant,
    wasm,
)
from tests.integration.helpers import rpc_error, violation_fields


def unique(prefix: str = "act") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def signature_for(module: bytes, key: Ed25519PrivateKey | None = None) -> tuple[str, str]:
    key = key or Ed25519PrivateKey.generate()
    digest = hashlib.sha256(module).hexdigest()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    document = {
        "alg": "ed25519",
        "public_key": base64.b64encode(public).decode(),
        "signature": base64.b64encode(key.sign(digest.encode())).decode(),
    }
    return json.dumps(document), f"ed25519:{hashlib.sha256(public).hexdigest()}"


async def test_upload_creates_a_pending_version_with_its_digest(actions: ActionsClient) -> None:
    module = wasm(ECHO)
    name = unique()
    uploaded = await actions.upload(name, module, permissions="read_secret:API_TOKEN")
    assert uploaded.outcome == api.UPLOAD_OUTCOME_CREATED
    version = uploaded.version
    assert (version.version, version.review_status) == (1, "pending_review")
    assert version.sha256 == hashlib.sha256(module).hexdigest()
    assert version.size_bytes == len(module)
    assert list(version.permissions) == ["read_secret:API_TOKEN"]
    assert version.signature_status == "unverified"
    assert uploaded.action.current_version == 0 and uploaded.action.latest_version == 1


async def test_identical_bytes_and_permissions_are_unchanged(actions: ActionsClient) -> None:
    name, module = unique(), wasm(ECHO)
    await actions.upload(name, module)
    again = await actions.upload(name, module)
    assert again.outcome == api.UPLOAD_OUTCOME_UNCHANGED and again.version.version == 1
    widened = await actions.upload(name, module, permissions="read_secret:MORE")
    assert widened.outcome == api.UPLOAD_OUTCOME_CREATED and widened.version.version == 2


@pytest.mark.parametrize(
    ("module", "needle"),
    [
        (b"", "empty"),
        (b"\x7fELF not a module", "WebAssembly"),
        (wasm(IMPORTS_A_FUNCTION), "import"),
        (wasm(NO_MEMORY), "memory"),
    ],
    ids=["empty", "not-wasm", "imports", "no-memory"],
)
async def test_a_bad_module_is_refused_and_nothing_is_stored(
    actions: ActionsClient, module: bytes, needle: str
) -> None:
    name = unique()
    error = await rpc_error(actions.upload(name, module))
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "MODULE_INVALID")
    assert violation_fields(error) == ["module"]
    assert needle.lower() in error.message.lower()
    missing = await rpc_error(
        actions.stub.GetAction(api.GetActionRequest(action=name), metadata=actions.md("viewer"))
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND


async def test_a_module_over_8_mib_is_refused(actions: ActionsClient) -> None:
    error = await rpc_error(actions.upload(unique(), b"\0asm" + b"\0" * (8 * 1024 * 1024)))
    assert error.reason == "MODULE_INVALID" and "8388608" in error.message


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("read_secret:OK, write_secret:NO", ["permissions[1]"]),
        ('["read_secret:A", "read_secret:bad-key"]', ["permissions[1]"]),
        ("[not json", ["permissions"]),
        (",".join(f"read_secret:K{i}" for i in range(26)), ["permissions"]),
    ],
    ids=["other-verb", "bad-key", "bad-json", "too-many"],
)
async def test_bad_permissions_are_named(
    actions: ActionsClient, text: str, fields: list[str]
) -> None:
    error = await rpc_error(actions.upload(unique(), wasm(ECHO), permissions=text))
    assert violation_fields(error) == fields


async def test_permissions_accept_lists_and_collapse_duplicates(actions: ActionsClient) -> None:
    uploaded = await actions.upload(
        unique(), wasm(ECHO), permissions="read_secret:A\nread_secret:B, read_secret:A"
    )
    assert list(uploaded.version.permissions) == ["read_secret:A", "read_secret:B"]


async def test_a_valid_signature_is_verified_and_fingerprinted(actions: ActionsClient) -> None:
    module = wasm(ECHO)
    signature, fingerprint = signature_for(module)
    uploaded = await actions.upload(unique(), module, signature=signature)
    assert uploaded.version.signature_status == "verified"
    assert uploaded.version.key_fingerprint == fingerprint


async def test_a_signature_that_does_not_verify_is_refused(actions: ActionsClient) -> None:
    signature, _ = signature_for(wasm(constant({"other": 1})))  # signs different bytes
    name = unique()
    error = await rpc_error(actions.upload(name, wasm(ECHO), signature=signature))
    assert (error.reason, violation_fields(error)) == ("SIGNATURE_INVALID", ["signature"])
    error = await rpc_error(actions.upload(name, wasm(ECHO), signature='{"alg": "rsa"}'))
    assert error.reason == "SIGNATURE_INVALID"


async def test_review_is_for_admins_other_than_the_uploader(actions: ActionsClient) -> None:
    name = unique()
    await actions.upload(name, wasm(ECHO), role="admin")
    error = await rpc_error(actions.review(name, 1, role="developer"))
    assert error.reason == "ROLE_TOO_LOW"
    error = await rpc_error(actions.review(name, 1, role="admin"))  # the uploader's own key
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SELF_REVIEW")


async def test_approval_makes_the_newest_approved_version_current(actions: ActionsClient) -> None:
    name = unique()
    await actions.upload(name, variant(ECHO, 1))
    await actions.upload(name, variant(ECHO, 2))
    await actions.upload(name, variant(ECHO, 3))
    await actions.review(name, 1)
    await actions.review(name, 2)
    reviewed = await actions.review(name, 3, decision="rejected")
    assert reviewed.version.review_status == "rejected"
    got = await actions.stub.GetAction(
        api.GetActionRequest(action=name), metadata=actions.md("viewer")
    )
    assert (got.action.current_version, got.action.latest_version) == (2, 3)
    detail = await actions.stub.GetActionVersion(
        api.GetActionVersionRequest(action=name, version=3), metadata=actions.md("viewer")
    )
    transitions = [(r.from_status, r.to_status) for r in detail.version.reviews]
    assert transitions == [("", "pending_review"), ("pending_review", "rejected")]
    assert detail.version.reviewed_by and detail.version.review_comment == "looks good"


async def test_bad_review_decisions_are_named(actions: ActionsClient) -> None:
    name = unique()
    await actions.upload(name, wasm(ECHO))
    error = await rpc_error(actions.review(name, 1, decision="maybe"))
    assert violation_fields(error) == ["decision"]
    error = await rpc_error(actions.review(name, 7))
    assert error.code == grpc.StatusCode.NOT_FOUND


async def test_the_kill_switch_is_for_admins(actions: ActionsClient) -> None:
    name = unique()
    await actions.upload(name, wasm(ECHO))
    error = await rpc_error(
        actions.stub.DisableAction(
            api.DisableActionRequest(action=name), metadata=actions.md("developer")
        )
    )
    assert error.reason == "ROLE_TOO_LOW"
    disabled = await actions.stub.DisableAction(
        api.DisableActionRequest(action=name), metadata=actions.md("admin")
    )
    assert not disabled.action.enabled
    enabled = await actions.stub.EnableAction(
        api.EnableActionRequest(action=name), metadata=actions.md("admin")
    )
    assert enabled.action.enabled


async def test_list_and_versions_paginate(actions: ActionsClient) -> None:
    names = sorted(unique("p") for _ in range(3))
    for name in names:
        await actions.upload(name, wasm(ECHO))
    for n in range(2, 4):
        await actions.upload(names[0], variant(ECHO, n))
    seen: list[str] = []
    token = ""
    while True:
        page = await actions.stub.ListActions(
            api.ListActionsRequest(page_size=2, page_token=token), metadata=actions.md("viewer")
        )
        seen.extend(a.name for a in page.actions)
        token = page.next_page_token
        if not token:
            break
    assert seen == names
    versions = await actions.stub.ListActionVersions(
        api.ListActionVersionsRequest(action=names[0], page_size=2), metadata=actions.md("viewer")
    )
    assert [v.version for v in versions.versions] == [3, 2] and versions.next_page_token


async def test_another_organization_cannot_see_or_touch_an_action(
    actions: ActionsClient, channel: grpc.aio.Channel, operator_token: str
) -> None:
    name = unique()
    await actions.upload(name, wasm(ECHO))
    intruder = ActionsClient(await make_tenant(channel, operator_token))
    for call in (
        intruder.stub.GetAction(api.GetActionRequest(action=name), metadata=intruder.md("admin")),
        intruder.review(name, 1),
        intruder.stub.DisableAction(
            api.DisableActionRequest(action=name), metadata=intruder.md("admin")
        ),
        intruder.stub.DeleteAction(
            api.DeleteActionRequest(action=name), metadata=intruder.md("admin")
        ),
    ):
        error = await rpc_error(call)
        assert error.code == grpc.StatusCode.NOT_FOUND
    listed = await intruder.stub.ListActions(
        api.ListActionsRequest(), metadata=intruder.md("admin")
    )
    assert name not in [a.name for a in listed.actions]
    # Uploading the same name in another organization is its own action.
    theirs = await intruder.upload(name, wasm(ECHO))
    assert theirs.version.version == 1


async def test_simulate_runs_an_unapproved_version_with_only_the_given_secrets(
    actions: ActionsClient,
) -> None:
    name = unique()
    await actions.upload(name, wasm(ECHO), permissions="read_secret:API_TOKEN")
    simulated = await actions.stub.SimulateAction(
        api.SimulateActionRequest(
            action=name,
            payload_json='{"orderId": "o-1", "amount": 12.5}',
            secrets={"API_TOKEN": "tok-123", "UNDECLARED": "nope"},
        ),
        metadata=actions.md("developer"),
    )
    result = simulated.result
    assert simulated.version == 1 and result.ok, result.failure_message
    echoed = json.loads(result.output_json)
    assert echoed["payload"] == {"orderId": "o-1", "amount": 12.5}
    assert echoed["secrets"] == {"API_TOKEN": "tok-123"}
    assert echoed["permissions"] == ["read_secret:API_TOKEN"] and echoed["action"] == name
    assert result.fuel_used > 0 and result.duration_us > 0 and result.peak_memory_bytes > 0


async def test_simulate_reports_projection_derived_event_and_typed_failures(
    actions: ActionsClient,
) -> None:
    name = unique()
    document = {
        "projection": {"name": "orders", "entity_type": "order", "entity_id": 42, "data": {"a": 1}},
        "derived_event": {"type": "orders.scored", "payload": {"score": 7}},
        "score": 7,
    }
    await actions.upload(name, wasm(constant(document)))
    await actions.upload(name, wasm(constant({"projection": {"name": "x", "entity_type": "t"}})))
    ok = await actions.stub.SimulateAction(
        api.SimulateActionRequest(action=name, version=1, payload_json="{}"),
        metadata=actions.md("developer"),
    )
    assert json.loads(ok.result.output_json) == {"score": 7}
    assert json.loads(ok.result.projection_json)["entity_id"] == "42"
    assert json.loads(ok.result.derived_event_json) == document["derived_event"]
    bad = await actions.stub.SimulateAction(
        api.SimulateActionRequest(action=name, payload_json="{}"), metadata=actions.md("developer")
    )
    assert not bad.result.ok and bad.result.failure_reason == "INVALID_OUTPUT"
    assert "projection.entity_id" in bad.result.failure_message
    error = await rpc_error(
        actions.stub.SimulateAction(
            api.SimulateActionRequest(action=name, payload_json="[1, 2]"),
            metadata=actions.md("developer"),
        )
    )
    assert violation_fields(error) == ["payload_json"]
