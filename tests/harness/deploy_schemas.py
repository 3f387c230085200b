"""Schema checks for the deployment files: Kubernetes manifests and the Compose file.

Kubernetes: the JSON schemas bundled in the pinned ``kubernetes-validate``
package (a dev dependency, so nothing is downloaded at test time), in strict
mode, so a misspelt field fails as surely as a wrong type. Each manifest is
checked against every version in ``KUBERNETES_VERSIONS``.

Compose: no Compose implementation runs here (the docker CLI has no compose
plugin and there is no engine), so the file is checked against the
compose-spec JSON schema that Docker Compose itself validates with. It comes
from the pinned Go module github.com/compose-spec/compose-go/v2, fetched once
with ``go mod download`` into ~/.cache/eventflow/compose-spec and verified
against the pinned go.sum hash.

CLI::

    python -m tests.harness.deploy_schemas fetch   # download the compose schema
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

# The oldest Kubernetes the manifests promise to run on (gRPC probes are GA
# since 1.27) and the newest the pinned kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.32.0", "1.37.0")

COMPOSE_GO = "github.com/compose-spec/compose-go/v2"
COMPOSE_GO_VERSION = "v2.16.2"
COMPOSE_GO_SUM = "h1:pTp1DqQwJzFd85GzlWsSszKA1ABrV/ySqsClujIcWA8="
CACHE_DIR = Path(
    os.environ.get("EVENTFLOW_COMPOSE_SPEC_CACHE")
    or Path.home() / ".cache" / "eventflow" / "compose-spec"
)
FETCH_TIMEOUT_S = 300

# Go's time.ParseDuration syntax: compose-go registers it as the "duration" format.
_GO_DURATION = re.compile(r"[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)")


class SchemaHarnessError(RuntimeError):
    """The schema could not be obtained (no Go toolchain, no network, wrong hash)."""


def kubernetes_problems(resource: dict[str, Any]) -> list[str]:
    """Why ``resource`` is not valid for each pinned Kubernetes version (empty: valid)."""
    name = f"{resource.get('kind')}/{resource.get('metadata', {}).get('name')}"
    problems = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            problems.append(f"{name} (Kubernetes {version}): {path}: {error.message}")
        except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError):
            # The command-line tool only warns here; an unknown kind is an error to us.
            problems.append(
                f"{name} (Kubernetes {version}): no schema for {resource.get('apiVersion')}"
            )
    return problems


def compose_problems(document: dict[str, Any]) -> list[str]:
    """Why Docker Compose would refuse ``document`` (a parsed compose file).

    First the compose-spec schema; then what Compose's loader refuses after
    it, since the schema admits any string where a variable may stand.
    """
    checker = jsonschema.FormatChecker()
    checker.checks("duration")(lambda value: not isinstance(value, str) or _is_duration(value))
    validator = jsonschema.Draft202012Validator(compose_schema(), format_checker=checker)
    problems = [
        f"{'.'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    ]
    return problems or _loader_problems(document)


def _loader_problems(document: dict[str, Any]) -> list[str]:
    services: dict[str, Any] = document.get("services") or {}
    declared_volumes = set(document.get("volumes") or {})
    problems = []
    for name, service in services.items():
        for dependency in service.get("depends_on") or {}:
            if dependency not in services:
                problems.append(f"services.{name}.depends_on: undefined service {dependency!r}")
        health = service.get("healthcheck") or {}
        for field in ("interval", "timeout", "start_period", "start_interval"):
            value = health.get(field)
            if isinstance(value, str) and "$" not in value and not _is_duration(value):
                problems.append(f"services.{name}.healthcheck.{field}: not a duration: {value!r}")
        retries = health.get("retries")
        if retries is not None and not isinstance(retries, int):
            problems.append(f"services.{name}.healthcheck.retries: not an integer: {retries!r}")
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source")
            named = source and not source.startswith((".", "/", "~", "$"))
            if named and source not in declared_volumes:
                problems.append(f"services.{name}.volumes: undefined volume {source!r}")
    return problems


def _is_duration(value: str) -> bool:
    return _GO_DURATION.fullmatch(value) is not None


@cache
def compose_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(fetch_compose_schema().read_text(encoding="utf-8"))
    return schema


def fetch_compose_schema() -> Path:
    """The pinned compose-spec.json, downloaded through the Go module proxy once."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GOMODCACHE": str(CACHE_DIR / "modcache"),
        # Module caches are read-only by default; this one must stay removable.
        "GOFLAGS": "-modcacherw",
        "GO111MODULE": "on",
        "GOTOOLCHAIN": "local",
    }
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{COMPOSE_GO}@{COMPOSE_GO_VERSION}"],
            cwd=CACHE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise SchemaHarnessError("the compose schema is fetched with `go`; install Go") from None
    if done.returncode != 0:
        raise SchemaHarnessError(f"go mod download failed:\n{done.stdout}{done.stderr}")
    module = json.loads(done.stdout)
    if module.get("Sum") != COMPOSE_GO_SUM:
        raise SchemaHarnessError(
            f"{COMPOSE_GO}@{COMPOSE_GO_VERSION} has hash {module.get('Sum')},"
            f" expected {COMPOSE_GO_SUM}"
        )
    return Path(module["Dir"]) / "schema" / "compose-spec.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.deploy_schemas")
    parser.add_argument("command", choices=["fetch"])
    parser.parse_args(argv)
    print(fetch_compose_schema())
    return 0


if __name__ == "__main__":
    sys.exit(main())
