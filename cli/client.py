"""One connection per command, opened only when a command needs the server.

Commands first validate their local input (files, masks) and only then call,
so a typo never costs a connection attempt. Every call carries the API key as
bearer metadata and a deadline, so a wedged server cannot hang a script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import grpc
from eventflow.governance.v1 import action_service_pb2_grpc
from eventflow.orchestrator.v1 import (
    event_service_pb2_grpc,
    instance_service_pb2_grpc,
    projection_service_pb2_grpc,
    sandbox_service_pb2_grpc,
    test_run_service_pb2_grpc,
)
from eventflow.registry.v1 import tenancy_service_pb2_grpc, workflow_service_pb2_grpc
from eventflow.vault.v1 import (
    audit_service_pb2_grpc,
    key_ring_service_pb2_grpc,
    secret_service_pb2_grpc,
)

from cli.errors import CommandError
from cli.profile import Settings

DEADLINE_SECONDS = 30.0
# Page size used while following pages with --all when none is given.
ALL_PAGE_SIZE = 200

R = TypeVar("R")


class Client:
    """The stubs plus the per-call metadata; handlers call through ``call``."""

    def __init__(
        self,
        workflows: Any,
        tenancy: Any,
        api_key: str,
        *,
        secrets: Any = None,
        key_ring: Any = None,
        audit: Any = None,
        actions: Any = None,
        events: Any = None,
        instances: Any = None,
        dead_letters: Any = None,
        sandbox: Any = None,
        test_runs: Any = None,
        projections: Any = None,
    ) -> None:
        self.workflows = workflows
        self.tenancy = tenancy
        self.secrets = secrets
        self.key_ring = key_ring
        self.audit = audit
        self.actions = actions
        self.events = events
        self.instances = instances
        self.dead_letters = dead_letters
        self.sandbox = sandbox
        self.test_runs = test_runs
        self.projections = projections
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()

    def call(
        self, method: Callable[..., R], request: Any, timeout: float | None = DEADLINE_SECONDS
    ) -> R:
        return method(request, metadata=self._metadata, timeout=timeout)


@contextmanager
def open_client(settings: Settings) -> Iterator[Client]:
    with grpc.insecure_channel(settings.server) as channel:
        yield Client(
            workflow_service_pb2_grpc.WorkflowServiceStub(channel),
            tenancy_service_pb2_grpc.TenancyServiceStub(channel),
            settings.api_key,
            secrets=secret_service_pb2_grpc.SecretServiceStub(channel),
            key_ring=key_ring_service_pb2_grpc.KeyRingServiceStub(channel),
            audit=audit_service_pb2_grpc.AuditServiceStub(channel),
            actions=action_service_pb2_grpc.ActionServiceStub(channel),
            events=event_service_pb2_grpc.EventServiceStub(channel),
            instances=instance_service_pb2_grpc.InstanceServiceStub(channel),
            dead_letters=instance_service_pb2_grpc.DeadLetterServiceStub(channel),
            sandbox=sandbox_service_pb2_grpc.SandboxServiceStub(channel),
            test_runs=test_run_service_pb2_grpc.TestRunServiceStub(channel),
            projections=projection_service_pb2_grpc.ProjectionServiceStub(channel),
        )


def collect_pages(
    fetch: Callable[[str], Any], items: Callable[[Any], Any], first_token: str, follow: bool
) -> Any:
    """The first page, or with ``follow`` every page merged into the first response.

    ``fetch(token)`` returns one response; ``items(response)`` its repeated
    field. The merged response keeps its message type so ``--output json``
    prints the same shape either way, with an empty ``next_page_token``.
    """
    response = fetch(first_token)
    seen = {first_token}
    while follow and response.next_page_token:
        token = response.next_page_token
        if token in seen:
            # A server bug must not turn into an endless loop.
            raise CommandError(f"server repeated page token {token!r}")
        seen.add(token)
        page = fetch(token)
        items(response).extend(items(page))
        response.next_page_token = page.next_page_token
    return response
