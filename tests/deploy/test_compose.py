"""docker-compose.yml agrees with the code it runs and with the other containers in it.

Each service's environment is the image's ENV plus its `environment:`,
loaded with the real ``Settings``; addresses are then compared with the
compose services, ports, listeners and volumes they must reach.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from cli.migrate import migrate
from libs.config import Settings
from libs.identity import SERVICES
from tests.deploy.files import (
    COMPOSE_FILE,
    OTEL_COLLECTOR_CONFIG,
    OTEL_VARIABLES,
    dockerfile_env,
    dockerfile_instructions,
    image,
    listen_port,
    parse_command,
    setting_names,
    split_address,
)

HEALTHCHECK_SCRIPT = "/app/deploy/healthcheck.py"


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    found: dict[str, dict[str, Any]] = document["services"]
    return found


def eventflow_containers(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if s.get("image") == image()}


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {name: "" if value is None else str(value) for name, value in env.items()}


def settings_of(service: dict[str, Any]) -> Settings:
    return Settings.load(environ={**dockerfile_env(), **environment(service)})


def volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source, for the short `source:target[:mode]` syntax used here."""
    return {v.split(":")[1]: v.split(":")[0] for v in service.get("volumes", [])}


def test_the_five_services_each_run_eventflow_serve_from_the_one_image(
    services: dict[str, dict[str, Any]],
) -> None:
    serving = {
        name: parse_command(service["command"])
        for name, service in eventflow_containers(services).items()
        if service["command"][0] == "serve"
    }
    assert sorted(serving) == sorted(SERVICES)
    for name, args in serving.items():
        assert args.service == name


def test_every_eventflow_container_is_built_from_deploy_dockerfile(
    services: dict[str, dict[str, Any]],
) -> None:
    built = eventflow_containers(services)
    assert set(built) == {*SERVICES, "init", "migrate"}
    for name, service in built.items():
        assert service["build"] == {"context": ".", "dockerfile": "deploy/Dockerfile"}, name
    images = {s["image"] for s in services.values() if "build" in s}
    assert images == {image()}


def test_every_variable_set_is_a_setting_of_libs_config(
    services: dict[str, dict[str, Any]],
) -> None:
    known = {*setting_names(), *OTEL_VARIABLES}
    for name, service in eventflow_containers(services).items():
        unknown = set(environment(service)) - known
        assert not unknown, f"{name} sets {sorted(unknown)}, which eventflow never reads"


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_reaches_postgres_and_kafka_in_the_stack(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    settings = settings_of(services[name])
    assert settings.bus == "kafka"
    url = urlsplit(settings.database_url)
    postgres = environment(services["postgres"])
    assert (url.hostname, url.port) == ("postgres", 5432)
    credentials = (url.username, url.password, url.path.lstrip("/"))
    assert credentials == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
        postgres["POSTGRES_DB"],
    )
    advertised = environment(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert f"PLAINTEXT://{settings.kafka_bootstrap}" in advertised


def test_the_migrate_container_runs_eventflow_migrate_on_the_same_database(
    services: dict[str, dict[str, Any]],
) -> None:
    assert parse_command(services["migrate"]["command"]).handler is migrate
    database = settings_of(services["migrate"]).database_url
    assert all(settings_of(services[name]).database_url == database for name in SERVICES)


def test_kafka_runs_as_a_single_kraft_node(services: dict[str, dict[str, Any]]) -> None:
    kafka = environment(services["kafka"])
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    voter_id, voter = kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].split("@")
    assert voter_id == kafka["KAFKA_NODE_ID"]
    assert f"{kafka['KAFKA_CONTROLLER_LISTENER_NAMES']}://:{voter.split(':')[1]}" in (
        kafka["KAFKA_LISTENERS"].split(",")
    )
    # Kafka's Uuid: 16 bytes, URL-safe base64 without padding.
    assert len(base64.urlsafe_b64decode(kafka["CLUSTER_ID"] + "==")) == 16
    protocols = dict(p.split(":") for p in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    listeners = [entry.split("://")[0] for entry in kafka["KAFKA_LISTENERS"].split(",")]
    assert set(listeners) == set(protocols)


@pytest.mark.parametrize("name", SERVICES)
def test_the_health_check_asks_the_grpc_port_the_service_listens_on(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    port = listen_port(settings_of(services[name]).grpc_listen)
    assert services[name]["healthcheck"]["test"] == [
        "CMD",
        "python",
        HEALTHCHECK_SCRIPT,
        f"127.0.0.1:{port}",
    ]
    copied = [shlex.split(c) for c in dockerfile_instructions("COPY")]
    assert ["deploy/healthcheck.py", HEALTHCHECK_SCRIPT] in copied


def test_published_ports_reach_the_grpc_listener_on_loopback_only(
    services: dict[str, dict[str, Any]],
) -> None:
    host_ports = []
    for name in SERVICES:
        (published,) = services[name]["ports"]
        host, host_port, container_port = published.split(":")
        assert host == "127.0.0.1", name
        assert int(container_port) == listen_port(settings_of(services[name]).grpc_listen)
        host_ports.append(host_port)
    assert len(set(host_ports)) == len(SERVICES)


@pytest.mark.parametrize("name", SERVICES)
def test_peer_addresses_name_compose_services_on_their_internal_port(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    settings = settings_of(services[name])
    peers = {
        "registry": settings.registry_address,
        "governance": settings.governance_address,
        "executor": settings.executor_address,
        "vault": settings.vault_address,
    }
    for peer, address in peers.items():
        host, port = split_address(address)
        assert host == peer
        assert port == listen_port(settings_of(services[peer]).internal_listen)


@pytest.mark.parametrize("name", SERVICES)
def test_services_start_once_their_dependencies_are_ready(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    conditions = {dep: d["condition"] for dep, d in services[name]["depends_on"].items()}
    assert conditions["postgres"] == conditions["kafka"] == "service_healthy"
    assert conditions["init"] == conditions["migrate"] == "service_completed_successfully"
    for dependency, condition in conditions.items():
        if condition == "service_healthy":
            assert services[dependency]["healthcheck"]["test"], dependency
        if condition == "service_completed_successfully":
            assert services[dependency].get("restart", "no") == "no", dependency


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_reads_the_certificates_init_makes(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    certs_dir = settings_of(services[name]).certs_dir
    assert f"eventflow certs --dir {certs_dir}" in services["init"]["command"][0]
    assert volume_mounts(services[name])[certs_dir] == volume_mounts(services["init"])[certs_dir]


def test_the_vault_reads_the_key_ring_init_makes(services: dict[str, dict[str, Any]]) -> None:
    keyring_file = settings_of(services["vault"]).vault_keyring_file
    folder = str(PurePosixPath(keyring_file).parent)
    init_script = " ".join(services["init"]["command"][0].split())
    assert f"eventflow admin keyring rotate --file {keyring_file}" in init_script
    assert f"test -s {keyring_file} ||" in init_script, "a restart must not add a key"
    assert volume_mounts(services["vault"])[folder] == volume_mounts(services["init"])[folder]
    for name in set(SERVICES) - {"vault"}:
        assert folder not in volume_mounts(services[name]), f"{name} must not see the key ring"


def test_traces_go_through_the_collector_to_jaeger(services: dict[str, dict[str, Any]]) -> None:
    collector = yaml.safe_load(OTEL_COLLECTOR_CONFIG.read_text(encoding="utf-8"))
    receiver = split_address(collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])
    for name in SERVICES:
        env = environment(services[name])
        assert settings_of(services[name]).telemetry_exporter == "otlp"
        endpoint = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert (endpoint.hostname, endpoint.port) == ("otel-collector", receiver[1])
        assert services[name]["depends_on"]["otel-collector"]

    config_path = services["otel-collector"]["command"][0].removeprefix("--config=")
    assert volume_mounts(services["otel-collector"])[config_path] == "./deploy/otel-collector.yaml"

    pipelines = collector["service"]["pipelines"]
    for pipeline in pipelines.values():
        for section in ("receivers", "processors", "exporters"):
            assert set(pipeline[section]) <= set(collector[section]), section
    (traces_exporter,) = pipelines["traces"]["exporters"]
    host, port = split_address(collector["exporters"][traces_exporter]["endpoint"])
    assert (host, port) == ("jaeger", 4317)  # Jaeger's OTLP/gRPC port
    assert environment(services["jaeger"])["COLLECTOR_OTLP_ENABLED"] == "true"
