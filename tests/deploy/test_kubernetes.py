"""deploy/k8s agrees with the code it deploys and with deploy/README.md.

Each container's environment is assembled as Kubernetes would (image ENV,
then envFrom in order, then env) and loaded with the real ``Settings``, so
ports, paths and peer addresses are compared with what the service would
really bind and dial.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from cli.main import run
from cli.migrate import migrate
from libs.config import SETTINGS, Settings
from libs.identity import SERVICES, ServiceCertificates
from services.vault.keyring import keyring_from_settings
from tests.deploy.files import (
    OTEL_VARIABLES,
    dockerfile_env,
    dockerfile_instructions,
    image,
    listen_port,
    parse_command,
    readme_commands,
    readme_secrets,
    resources,
    setting_names,
    split_address,
)

NAMESPACE = "eventflow"
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def deployments() -> dict[str, dict[str, Any]]:
    return resources("Deployment")


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def workloads() -> dict[str, dict[str, Any]]:
    """Every pod template: the five Deployments and the migration Job."""
    return {**deployments(), **{f"job/{n}": j for n, j in resources("Job").items()}}


def main_container(workload: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod(workload)["containers"]
    return container


def _secret_placeholder(name: str, key: str) -> str:
    return f"<secret {name}/{key}>"


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The environment the container's process sees (Secret values stand in as placeholders)."""
    env = dockerfile_env()
    config_maps, secrets = resources("ConfigMap"), readme_secrets()
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]]["data"])
        else:
            name = source["secretRef"]["name"]
            env.update({key: _secret_placeholder(name, key) for key in secrets[name].sources})
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            env[variable["name"]] = _secret_placeholder(ref["name"], ref["key"])
    return env


def settings_of(workload: dict[str, Any]) -> Settings:
    return Settings.load(environ=container_env(main_container(workload)))


def variables_set() -> dict[str, str]:
    """Every variable the manifests (and the Secrets they load whole) set, with where."""
    found = {}
    for name, config_map in resources("ConfigMap").items():
        found.update({key: f"ConfigMap {name}" for key in config_map["data"]})
    secrets = readme_secrets()
    for name, workload in workloads().items():
        container = main_container(workload)
        found.update({v["name"]: f"{name} env" for v in container.get("env", [])})
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                secret = source["secretRef"]["name"]
                found.update({key: f"Secret {secret}" for key in secrets[secret].sources})
    return found


def test_the_five_services_each_run_eventflow_serve() -> None:
    assert sorted(deployments()) == sorted(SERVICES)
    for name, deployment in deployments().items():
        container = main_container(deployment)
        assert "command" not in container, "the image's entry point (eventflow) must stay"
        args = parse_command(container["args"])
        assert (args.stack, args.service) == ("serve", name)


def test_the_migration_job_runs_eventflow_migrate_on_the_database() -> None:
    (job,) = resources("Job").values()
    container = main_container(job)
    assert "command" not in container
    assert parse_command(container["args"]).handler is migrate
    assert settings_of(job).database_url
    assert pod(job)["restartPolicy"] in ("OnFailure", "Never")


def test_every_container_runs_the_one_image() -> None:
    for name, workload in workloads().items():
        for container in pod(workload)["containers"] + pod(workload).get("initContainers", []):
            assert container["image"] == image(), name


def test_every_variable_set_is_a_setting_of_libs_config() -> None:
    known = setting_names()
    # The OpenTelemetry SDK reads its own variables; the telemetry setting names them.
    assert all(v in SETTINGS["telemetry_exporter"].description for v in OTEL_VARIABLES)
    unknown = {v: where for v, where in variables_set().items() if v not in known}
    assert set(unknown) <= set(OTEL_VARIABLES), unknown


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_runs_with_production_settings(name: str) -> None:
    settings = settings_of(deployments()[name])
    assert settings.bus == "kafka"
    assert settings.database_url and settings.operator_token
    assert settings.telemetry_exporter == "otlp"
    if name == "vault":
        assert settings.vault_keyring, "the vault needs its key ring"
    else:
        assert not settings.vault_keyring and not settings.vault_keyring_file


@pytest.mark.parametrize("name", SERVICES)
def test_grpc_probes_ask_the_port_the_service_listens_on(name: str) -> None:
    deployment = deployments()[name]
    settings, container = settings_of(deployment), main_container(deployment)
    public = listen_port(settings.grpc_listen)
    for probe in PROBES:
        assert container[probe]["grpc"]["port"] == public, probe
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": public, "internal": listen_port(settings.internal_listen)}


def _service_port(service: dict[str, Any], port: int) -> dict[str, Any]:
    (match,) = [p for p in service["spec"]["ports"] if p["port"] == port]
    return match


@pytest.mark.parametrize("name", SERVICES)
def test_peer_addresses_reach_each_peers_internal_listener(name: str) -> None:
    settings = settings_of(deployments()[name])
    peers = {
        "registry": settings.registry_address,
        "governance": settings.governance_address,
        "executor": settings.executor_address,
        "vault": settings.vault_address,
    }
    for peer, address in peers.items():
        host, port = split_address(address)
        assert host == peer, f"{name} reaches {peer} through Service {host!r}"
        service = resources("Service")[host]
        assert service["metadata"]["namespace"] == NAMESPACE
        target = deployments()[peer]
        assert service["spec"]["selector"] == target["spec"]["selector"]["matchLabels"]
        named = {p["name"]: p["containerPort"] for p in main_container(target)["ports"]}
        container_port = named[_service_port(service, port)["targetPort"]]
        assert container_port == listen_port(settings_of(target).internal_listen)


@pytest.mark.parametrize("name", SERVICES)
def test_each_service_mounts_the_ca_and_only_its_own_key(name: str) -> None:
    deployment = deployments()[name]
    settings, spec = settings_of(deployment), pod(deployment)
    (mount,) = [m for m in main_container(deployment)["volumeMounts"] if m["name"] == "certs"]
    assert mount["mountPath"] == settings.certs_dir and mount["readOnly"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "certs"]
    items = {i["key"]: i["path"] for i in volume["secret"]["items"]}
    assert items == {f: f for f in ("ca.pem", f"{name}.pem", f"{name}.key")}


def test_the_pods_meet_the_restricted_pod_security_standard() -> None:
    (namespace,) = resources("Namespace").values()
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    (user,) = dockerfile_instructions("USER")
    for name, workload in workloads().items():
        spec = pod(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert str(spec["securityContext"]["runAsUser"]) == user.split(":")[0], name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for volume in spec.get("volumes", []):
            assert set(volume) - {"name"} <= {"secret", "emptyDir", "configMap"}, name
        context = main_container(workload)["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"]["drop"] == ["ALL"], name


def test_every_namespaced_resource_is_in_the_eventflow_namespace() -> None:
    for kind in ("ConfigMap", "Deployment", "Service", "Job"):
        for name, resource in resources(kind).items():
            assert resource["metadata"]["namespace"] == NAMESPACE, f"{kind}/{name}"


def _secret_references() -> set[tuple[str, str | None]]:
    """(Secret, key) pairs the manifests read; key None for a Secret loaded whole."""
    used: set[tuple[str, str | None]] = set()
    for workload in workloads().values():
        for source in main_container(workload).get("envFrom", []):
            if "secretRef" in source:
                used.add((source["secretRef"]["name"], None))
        for variable in main_container(workload).get("env", []):
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                used.add((ref["name"], ref["key"]))
        for volume in pod(workload).get("volumes", []):
            if "secret" in volume:
                for item in volume["secret"]["items"]:
                    used.add((volume["secret"]["secretName"], item["key"]))
    return used


def test_the_readme_creates_every_secret_the_manifests_read() -> None:
    created = readme_secrets()
    for secret, key in _secret_references():
        assert secret in created, f"deploy/README.md never creates Secret {secret}"
        if key is not None:
            assert key in created[secret].sources, f"Secret {secret} lacks key {key}"
    assert {name for name, _ in _secret_references()} == set(created)


def test_the_ca_private_key_stays_off_the_cluster() -> None:
    for secret in readme_secrets().values():
        assert not any(Path(path or "").name == "ca.key" for path in secret.sources.values())


def _readme_eventflow_command(subcommand: str) -> list[str]:
    (words,) = [w for w in readme_commands("eventflow") if subcommand in w]
    return words


def test_the_readme_certificates_load_as_each_pod_mounts_them(tmp_path: Path) -> None:
    certs_command = _readme_eventflow_command("certs")
    folder = certs_command[certs_command.index("--dir") + 1]
    assert run([*certs_command[1:-1], str(tmp_path / folder)]) == 0
    sources = readme_secrets()["eventflow-certs"].sources
    for name, deployment in deployments().items():
        (volume,) = [v for v in pod(deployment)["volumes"] if v["name"] == "certs"]
        mounted = tmp_path / "mounted" / name
        mounted.mkdir(parents=True)
        for item in volume["secret"]["items"]:
            shutil.copy(tmp_path / str(sources[item["key"]]), mounted / item["path"])
        certificates = ServiceCertificates.load(mounted, name)
        subject = x509.load_pem_x509_certificate(certificates.cert_pem).subject
        assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name


def test_the_readme_key_ring_secret_is_a_ring_the_vault_loads(tmp_path: Path) -> None:
    rotate = _readme_eventflow_command("rotate")
    keyring_file = rotate[rotate.index("--file") + 1]
    (source,) = readme_secrets()["eventflow-vault-keyring"].sources.items()
    assert source == ("keyring", keyring_file), "the Secret is made from the file rotate wrote"
    assert run([*rotate[1:-1], str(tmp_path / keyring_file)]) == 0

    (variable,) = [v for v in main_container(deployments()["vault"])["env"] if "valueFrom" in v]
    assert variable["valueFrom"]["secretKeyRef"] == {
        "name": "eventflow-vault-keyring",
        "key": "keyring",
    }
    text = (tmp_path / keyring_file).read_text()
    ring = keyring_from_settings(Settings.load(environ={variable["name"]: text}))
    assert ring.primary.version == 1
