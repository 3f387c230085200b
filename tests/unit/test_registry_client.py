"""libs.registry_client: the orchestrator's cached view of webhook signing secrets."""

from __future__ import annotations

import grpc
import pytest

from libs.identity import ServiceCertificates
from libs.registry_client import WebhookSecrets

NO_CERTIFICATES = ServiceCertificates("orchestrator", b"", b"", b"")


class Unavailable(grpc.RpcError):
    pass


class CountingSecrets(WebhookSecrets):
    """The real cache in front of a fake registry that counts its lookups."""

    def __init__(self, answers: dict[str, list[str]], ttl_s: float) -> None:
        super().__init__("registry:7001", NO_CERTIFICATES, ttl_s=ttl_s)
        self.answers = answers
        self.lookups: list[str] = []
        self.failing = False

    async def _lookup(self, workflow_id: str) -> list[str]:
        self.lookups.append(workflow_id)
        if self.failing:
            raise Unavailable()
        return list(self.answers[workflow_id])


async def test_a_lookup_is_reused_within_the_ttl_per_workflow() -> None:
    client = CountingSecrets({"wf-1": ["whsec_new", "whsec_old"], "wf-2": ["whsec_b"]}, 60)
    assert await client.for_workflow("wf-1") == ["whsec_new", "whsec_old"]
    assert await client.for_workflow("wf-1") == ["whsec_new", "whsec_old"]
    assert await client.for_workflow("wf-2") == ["whsec_b"]
    assert client.lookups == ["wf-1", "wf-2"]


async def test_an_expired_entry_is_looked_up_again_and_sees_a_rotation() -> None:
    client = CountingSecrets({"wf-1": ["whsec_a"]}, ttl_s=0)
    assert await client.for_workflow("wf-1") == ["whsec_a"]
    client.answers["wf-1"] = ["whsec_b", "whsec_a"]
    assert await client.for_workflow("wf-1") == ["whsec_b", "whsec_a"]
    assert client.lookups == ["wf-1", "wf-1"]


async def test_failures_are_not_cached() -> None:
    client = CountingSecrets({"wf-1": ["whsec_a"]}, ttl_s=60)
    client.failing = True
    with pytest.raises(Unavailable):
        await client.for_workflow("wf-1")
    client.failing = False
    assert await client.for_workflow("wf-1") == ["whsec_a"]
    assert client.lookups == ["wf-1", "wf-1"]


async def test_callers_cannot_change_the_cached_list() -> None:
    client = CountingSecrets({"wf-1": ["whsec_a"]}, ttl_s=60)
    (await client.for_workflow("wf-1")).append("whsec_forged")
    assert await client.for_workflow("wf-1") == ["whsec_a"]


async def test_close_without_a_channel_is_a_no_op() -> None:
    await CountingSecrets({}, ttl_s=60).close()
