"""Settings, read from environment variables (and optionally a TOML file).

Every setting has a development default, so the embedded stack needs none.
The README's settings table is generated from ``SETTINGS`` below; keep the
descriptions there, not in scattered ``os.environ`` reads.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Setting:
    env: str
    default: str
    description: str


SETTINGS: dict[str, Setting] = {
    "database_url": Setting(
        "EVENTFLOW_DATABASE_URL",
        "",
        "PostgreSQL connection string. Empty: the embedded server under the data dir.",
    ),
    "bus": Setting("EVENTFLOW_BUS", "inprocess", "Message bus adapter: `kafka` or `inprocess`."),
    "kafka_bootstrap": Setting(
        "EVENTFLOW_KAFKA_BOOTSTRAP", "127.0.0.1:9092", "Kafka bootstrap servers (bus=kafka)."
    ),
    "kafka_namespace": Setting(
        "EVENTFLOW_KAFKA_NAMESPACE",
        "",
        "Prefix for every Kafka topic and consumer group (`<ns>.eventflow.events`), so"
        " several installations can share a cluster. Empty: none.",
    ),
    "grpc_listen": Setting(
        "EVENTFLOW_GRPC_LISTEN", "127.0.0.1:7233", "Address the gRPC server binds."
    ),
    "data_dir": Setting(
        "EVENTFLOW_DATA_DIR",
        ".eventflow",
        "Where the dev stack keeps embedded PostgreSQL data and credentials.",
    ),
    "operator_token": Setting(
        "EVENTFLOW_OPERATOR_TOKEN",
        "",
        "Bearer token of the platform operator (creates organizations). Empty: none.",
    ),
    "telemetry_exporter": Setting(
        "EVENTFLOW_TELEMETRY_EXPORTER",
        "",
        "`none`, `console`, or `otlp` (then OTEL_EXPORTER_OTLP_ENDPOINT applies)."
        " Empty: `console` into `<data dir>/telemetry.log` for the dev stack, `none` otherwise.",
    ),
    "log_level": Setting("EVENTFLOW_LOG_LEVEL", "INFO", "Python log level."),
    "db_pool_max": Setting(
        "EVENTFLOW_DB_POOL_MAX", "10", "Maximum PostgreSQL connections per service pool."
    ),
    "outbox_poll_ms": Setting(
        "EVENTFLOW_OUTBOX_POLL_MS",
        "500",
        "How often an outbox relay looks for unsent records when not woken.",
    ),
    "internal_listen": Setting(
        "EVENTFLOW_INTERNAL_LISTEN",
        "127.0.0.1:7234",
        "Address of the mutual-TLS listener for service-to-service calls.",
    ),
    "certs_dir": Setting(
        "EVENTFLOW_CERTS_DIR",
        "",
        "Folder with `ca.pem` and `<service>.pem/.key`. Empty: `<data dir>/certs`, generated.",
    ),
    "registry_address": Setting(
        "EVENTFLOW_REGISTRY_ADDRESS",
        "",
        "The registry's internal listener (API key lookups). Empty: this process's own.",
    ),
    "governance_address": Setting(
        "EVENTFLOW_GOVERNANCE_ADDRESS",
        "",
        "Governance's internal listener. Empty: this process's own (the one-process stack).",
    ),
    "executor_address": Setting(
        "EVENTFLOW_EXECUTOR_ADDRESS",
        "",
        "The executor's internal listener. Empty: this process's own.",
    ),
    "vault_address": Setting(
        "EVENTFLOW_VAULT_ADDRESS", "", "The vault's internal listener. Empty: this process's own."
    ),
    "executor_workers": Setting(
        "EVENTFLOW_EXECUTOR_WORKERS",
        "0",
        "Worker processes that run WebAssembly guests. 0: one per CPU core.",
    ),
    "webhooks_allow_private": Setting(
        "EVENTFLOW_WEBHOOKS_ALLOW_PRIVATE",
        "false",
        "`true` lets webhooks reach private and loopback addresses (self-hosted receivers,"
        " tests). Cloud metadata addresses stay blocked.",
    ),
    "orchestrator_concurrency": Setting(
        "EVENTFLOW_ORCHESTRATOR_CONCURRENCY",
        "64",
        "Instances one orchestrator process drives at once (steps mostly wait on I/O).",
    ),
    "actions_disabled": Setting(
        "EVENTFLOW_ACTIONS_DISABLED",
        "false",
        "Server-wide kill switch: `true` makes every custom action fail with ACTION_DISABLED.",
    ),
    "vault_keyring": Setting(
        "EVENTFLOW_VAULT_KEYRING",
        "",
        "Vault key-encryption keys inline: `VERSION:BASE64KEY` entries (32-byte keys),"
        " comma-separated; the highest version wraps new secrets. Set this or the file, not both.",
    ),
    "vault_keyring_file": Setting(
        "EVENTFLOW_VAULT_KEYRING_FILE",
        "",
        "File with the vault key ring, one `VERSION:BASE64KEY` per line (mode 0600)."
        " `eventflow admin keyring rotate --file` creates it or adds a version.",
    ),
    "log_format": Setting(
        "EVENTFLOW_LOG_FORMAT",
        "",
        "`json` (one object per line, with trace ids) or `text`. Empty: `json` for"
        " `eventflow serve`, `text` for the dev stack.",
    ),
}


@dataclass(frozen=True)
class Settings:
    database_url: str
    bus: str
    kafka_bootstrap: str
    kafka_namespace: str
    grpc_listen: str
    data_dir: Path
    operator_token: str
    telemetry_exporter: str
    log_level: str
    db_pool_max: int
    outbox_poll_ms: int
    internal_listen: str
    certs_dir: str
    registry_address: str
    governance_address: str
    executor_address: str
    vault_address: str
    executor_workers: int
    webhooks_allow_private: bool
    orchestrator_concurrency: int
    actions_disabled: bool
    # Key material: kept out of repr, since settings end up in logs and tracebacks.
    vault_keyring: str = field(default="", repr=False)
    vault_keyring_file: str = ""
    log_format: str = ""

    @classmethod
    def load(
        cls,
        environ: Mapping[str, str] | None = None,
        config_file: Path | None = None,
        **overrides: object,
    ) -> Settings:
        """Defaults < config file (TOML, keys as in SETTINGS) < environment < overrides."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {name: s.default for name, s in SETTINGS.items()}
        if config_file is not None:
            values.update(_read_config_file(config_file))
        for name, setting in SETTINGS.items():
            if setting.env in environ:
                values[name] = environ[setting.env]
        unknown = sorted(set(overrides) - set(SETTINGS))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
        values.update(overrides)
        coerced: dict[str, Any] = {f.name: _coerce(f.name, values[f.name]) for f in fields(cls)}
        return cls(**coerced)


def _read_config_file(path: Path) -> dict[str, object]:
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    unknown = sorted(set(data) - set(SETTINGS))
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    return data


def _coerce(name: str, value: object) -> object:
    if name == "data_dir":
        return Path(str(value))
    if name in ("actions_disabled", "webhooks_allow_private"):
        text = str(value).lower()
        if text not in ("true", "false", "1", "0"):
            raise ValueError(f"{SETTINGS[name].env} must be true or false, got {value!r}")
        return text in ("true", "1")
    if name in ("db_pool_max", "outbox_poll_ms", "executor_workers", "orchestrator_concurrency"):
        try:
            return int(str(value))
        except ValueError:
            raise ValueError(f"{SETTINGS[name].env} must be an integer, got {value!r}") from None
    if name == "log_format" and value not in ("", "json", "text"):
        raise ValueError(f"EVENTFLOW_LOG_FORMAT must be json or text, got {value!r}")
    if name == "bus" and value not in ("kafka", "inprocess"):
        raise ValueError(f"EVENTFLOW_BUS must be kafka or inprocess, got {value!r}")
    return str(value)


def settings_table() -> str:
    """The Markdown table of settings for the README."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for s in SETTINGS.values():
        default = f"`{s.default}`" if s.default else "(empty)"
        rows.append(f"| `{s.env}` | {default} | {s.description} |")
    return "\n".join(rows)
