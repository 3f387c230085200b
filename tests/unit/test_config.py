"""Settings: defaults < TOML config file < environment < explicit overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from libs.config import SETTINGS, Settings, settings_table


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eventflow.toml"
    path.write_text(text)
    return path


def test_every_setting_has_a_development_default() -> None:
    settings = Settings.load(environ={})
    assert settings == Settings(
        database_url="",
        bus="inprocess",
        kafka_bootstrap="127.0.0.1:9092",
        kafka_namespace="",
        grpc_listen="127.0.0.1:7233",
        data_dir=Path(".eventflow"),
        operator_token="",
        telemetry_exporter="",  # empty: the entry point picks (dev: console to a file),
        log_level="INFO",
        db_pool_max=10,
        outbox_poll_ms=500,
        internal_listen="127.0.0.1:7234",
        certs_dir="",  # empty: a dev CA under the data dir
        registry_address="",  # empty: this process's own internal listener
        governance_address="",
        executor_address="",
        vault_address="",
        executor_workers=0,  # one per core
        webhooks_allow_private=False,
        orchestrator_concurrency=64,
        actions_disabled=False,
        vault_keyring="",
        vault_keyring_file="",
    )


def test_the_actions_kill_switch_reads_true_and_false() -> None:
    assert Settings.load(environ={"EVENTFLOW_ACTIONS_DISABLED": "true"}).actions_disabled
    assert not Settings.load(environ={"EVENTFLOW_ACTIONS_DISABLED": "0"}).actions_disabled
    with pytest.raises(ValueError, match="EVENTFLOW_ACTIONS_DISABLED"):
        Settings.load(environ={"EVENTFLOW_ACTIONS_DISABLED": "maybe"})


def test_settings_and_their_table_describe_the_same_names() -> None:
    assert [f.name for f in dataclasses.fields(Settings)] == list(SETTINGS)


def test_environment_variables_override_defaults() -> None:
    settings = Settings.load(
        environ={
            "EVENTFLOW_DATABASE_URL": "postgresql://db.internal/eventflow",
            "EVENTFLOW_BUS": "kafka",
            "EVENTFLOW_KAFKA_BOOTSTRAP": "kafka-0:9092,kafka-1:9092",
            "EVENTFLOW_GRPC_LISTEN": "0.0.0.0:443",
            "EVENTFLOW_DATA_DIR": "/var/lib/eventflow",
            "EVENTFLOW_OPERATOR_TOKEN": "op-token",
            "EVENTFLOW_TELEMETRY_EXPORTER": "otlp",
            "EVENTFLOW_LOG_LEVEL": "DEBUG",
            "EVENTFLOW_DB_POOL_MAX": "25",
            "EVENTFLOW_OUTBOX_POLL_MS": "100",
        }
    )
    assert settings == dataclasses.replace(
        Settings.load(environ={}),
        database_url="postgresql://db.internal/eventflow",
        bus="kafka",
        kafka_bootstrap="kafka-0:9092,kafka-1:9092",
        grpc_listen="0.0.0.0:443",
        data_dir=Path("/var/lib/eventflow"),
        operator_token="op-token",
        telemetry_exporter="otlp",
        log_level="DEBUG",
        db_pool_max=25,
        outbox_poll_ms=100,
    )


def test_the_process_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTFLOW_GRPC_LISTEN", "127.0.0.1:9999")
    monkeypatch.setenv("EVENTFLOW_DB_POOL_MAX", "3")
    settings = Settings.load()
    assert settings.grpc_listen == "127.0.0.1:9999"
    assert settings.db_pool_max == 3


def test_unrelated_environment_variables_are_ignored() -> None:
    assert Settings.load(environ={"EVENTFLOW_NOPE": "1", "PATH": "/bin"}) == Settings.load(
        environ={}
    )


def test_a_config_file_sets_values(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        'bus = "kafka"\nkafka_bootstrap = "broker:9092"\ndb_pool_max = 20\n'
        'data_dir = "/srv/eventflow"\n',
    )
    settings = Settings.load(environ={}, config_file=path)
    assert settings.bus == "kafka"
    assert settings.kafka_bootstrap == "broker:9092"
    assert settings.db_pool_max == 20
    assert settings.data_dir == Path("/srv/eventflow")
    assert settings.grpc_listen == "127.0.0.1:7233"


def test_an_unknown_key_in_the_config_file_is_rejected_naming_it(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'bus = "kafka"\ngrpc_port = 7233\n')
    with pytest.raises(ValueError, match="grpc_port") as caught:
        Settings.load(environ={}, config_file=path)
    assert str(path) in str(caught.value)


def test_environment_variable_names_are_not_config_file_keys(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'EVENTFLOW_BUS = "kafka"\n')
    with pytest.raises(ValueError, match="EVENTFLOW_BUS"):
        Settings.load(environ={}, config_file=path)


def test_precedence_is_defaults_then_file_then_environment_then_overrides(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, 'grpc_listen = "file:1"\nlog_level = "WARNING"\n')
    environ = {"EVENTFLOW_GRPC_LISTEN": "env:2", "EVENTFLOW_OUTBOX_POLL_MS": "250"}

    from_file = Settings.load(environ={}, config_file=path)
    assert (from_file.grpc_listen, from_file.log_level) == ("file:1", "WARNING")

    from_env = Settings.load(environ=environ, config_file=path)
    assert (from_env.grpc_listen, from_env.log_level, from_env.outbox_poll_ms) == (
        "env:2",
        "WARNING",
        250,
    )

    overridden = Settings.load(environ=environ, config_file=path, grpc_listen="override:3")
    assert (overridden.grpc_listen, overridden.log_level, overridden.outbox_poll_ms) == (
        "override:3",
        "WARNING",
        250,
    )
    assert overridden.telemetry_exporter == ""  # untouched: still the default


def test_overrides_are_coerced_like_environment_values() -> None:
    settings = Settings.load(environ={}, db_pool_max="7", data_dir="/tmp/ef")
    assert settings.db_pool_max == 7
    assert settings.data_dir == Path("/tmp/ef")


@pytest.mark.parametrize("variable", ["EVENTFLOW_DB_POOL_MAX", "EVENTFLOW_OUTBOX_POLL_MS"])
@pytest.mark.parametrize("value", ["ten", "", "1.5", "10ms"])
def test_integer_settings_reject_non_integers_naming_the_variable(
    variable: str, value: str
) -> None:
    with pytest.raises(ValueError, match=variable):
        Settings.load(environ={variable: value})


def test_a_non_integer_in_the_config_file_is_rejected(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'db_pool_max = "lots"\n')
    with pytest.raises(ValueError, match="EVENTFLOW_DB_POOL_MAX"):
        Settings.load(environ={}, config_file=path)


@pytest.mark.parametrize("bus", ["rabbitmq", "Kafka", "", "in-process"])
def test_the_bus_is_kafka_or_inprocess(bus: str) -> None:
    with pytest.raises(ValueError, match="EVENTFLOW_BUS"):
        Settings.load(environ={"EVENTFLOW_BUS": bus})


def test_a_bad_bus_from_an_override_is_rejected() -> None:
    with pytest.raises(ValueError, match="EVENTFLOW_BUS"):
        Settings.load(environ={}, bus="nats")


def test_settings_table_lists_every_environment_variable_with_its_default() -> None:
    table = settings_table()
    lines = table.splitlines()
    assert lines[0] == "| variable | default | meaning |"
    assert len(lines) == 2 + len(SETTINGS)
    for setting in SETTINGS.values():
        row = next(line for line in lines if f"`{setting.env}`" in line)
        if setting.default:
            assert f"`{setting.default}`" in row
        assert setting.description in row


def test_every_environment_variable_is_namespaced() -> None:
    assert all(s.env.startswith("EVENTFLOW_") for s in SETTINGS.values())
    assert len({s.env for s in SETTINGS.values()}) == len(SETTINGS)
