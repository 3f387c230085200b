"""Every deployment file is valid for the tool that reads it, and broken copies are not.

The Kubernetes manifests against the API schemas of the pinned versions
(strict: unknown fields fail), docker-compose.yml against the compose-spec
schema and the checks Compose's loader adds (tests/harness/deploy_schemas.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.files import (
    COMPOSE_FILE,
    K8S,
    KUSTOMIZATION,
    compose,
    manifest_files,
    manifests,
    project,
    yaml_documents,
)
from tests.harness.deploy_schemas import KUBERNETES_VERSIONS, compose_problems, kubernetes_problems


def _resource_id(resource: dict[str, Any]) -> str:
    return f"{resource['kind']}/{resource['metadata']['name']}"


@pytest.mark.parametrize("resource", manifests(), ids=_resource_id)
def test_every_manifest_is_valid_for_the_pinned_kubernetes_versions(
    resource: dict[str, Any],
) -> None:
    assert kubernetes_problems(resource) == []


def test_the_kustomization_applies_every_manifest_in_the_folder() -> None:
    (kustomization,) = yaml_documents(KUSTOMIZATION)
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifest_files())
    assert kustomization["namespace"] == "eventflow"
    (image,) = kustomization["images"]
    assert (image["name"], image["newTag"]) == ("eventflow", project()["project"]["version"])


def test_the_pinned_versions_are_ones_the_manifests_promise() -> None:
    readme = (K8S.parent / "README.md").read_text(encoding="utf-8")
    oldest = KUBERNETES_VERSIONS[0].rsplit(".", 1)[0]
    assert f"Kubernetes {oldest} or newer" in readme


def _corrupted_copy(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text(encoding="utf-8")
    assert old in text, f"{source.name} no longer contains {old!r}; pick another corruption"
    copy = tmp_path / source.name
    copy.write_text(text.replace(old, new, 1), encoding="utf-8")
    return copy


MANIFEST_CORRUPTIONS = {
    "replicas is a string": ("replicas: 2", 'replicas: "two"', "spec.replicas"),
    "a misspelt field": ("readinessProbe:", "readinesProbe:", "'readinesProbe' was unexpected"),
    "a named port in a gRPC probe": ("port: 7233\n", "port: grpc\n", "grpc.port"),
    "an API version that does not exist": ("apps/v1", "apps/v2", "no schema for apps/v2"),
    "a Service port given as a string": ("port: 7234\n", "port: '7234'\n", "spec.ports.1.port"),
}


@pytest.mark.parametrize(
    ("old", "new", "expected"), MANIFEST_CORRUPTIONS.values(), ids=MANIFEST_CORRUPTIONS.keys()
)
def test_a_corrupted_manifest_is_rejected(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    copy = _corrupted_copy(tmp_path, K8S / "registry.yaml", old, new)
    problems = [p for resource in yaml_documents(copy) for p in kubernetes_problems(resource)]
    assert problems, "the validator accepted a broken manifest"
    assert any(expected in problem for problem in problems), problems


def test_the_compose_file_is_valid() -> None:
    assert compose_problems(compose()) == []


COMPOSE_CORRUPTIONS = {
    "ports is a number": ('ports:\n      - "127.0.0.1:7233:7233"', "ports: 7233", "ports"),
    "an unknown depends_on condition": (
        "kafka: {condition: service_healthy}",
        "kafka: {condition: service_ready}",
        "depends_on",
    ),
    "a misspelt key": ("  healthcheck:\n    test: [", "  helthcheck:\n    test: [", "helthcheck"),
    "a health check interval that is no duration": (
        "interval: 2s",
        "interval: 2 seconds",
        "not a duration",
    ),
    "a dependency on a service that does not exist": (
        "jaeger: {condition: service_started}",
        "tracing: {condition: service_started}",
        "undefined service 'tracing'",
    ),
    "an undeclared volume": (
        "- kafka-data:/var/lib/kafka/data",
        "- kafka-logs:/var/lib/kafka/data",
        "undefined volume 'kafka-logs'",
    ),
}


@pytest.mark.parametrize(
    ("old", "new", "expected"), COMPOSE_CORRUPTIONS.values(), ids=COMPOSE_CORRUPTIONS.keys()
)
def test_a_corrupted_compose_file_is_rejected(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    copy = _corrupted_copy(tmp_path, COMPOSE_FILE, old, new)
    problems = compose_problems(yaml.safe_load(copy.read_text(encoding="utf-8")))
    assert problems, "the validator accepted a broken compose file"
    assert any(expected in problem for problem in problems), problems
