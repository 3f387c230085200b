"""The deployment files, read the way the tools that run them read them.

The deploy tests compare these against the code: settings in libs/config.py,
commands in cli/, the install steps in the Makefile.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cli.main import build_parser
from libs.config import SETTINGS

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
KUSTOMIZATION = K8S / "kustomization.yaml"
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
DEPLOY_README = DEPLOY / "README.md"
OTEL_COLLECTOR_CONFIG = DEPLOY / "otel-collector.yaml"

# Variables the OpenTelemetry SDK reads itself; libs/config.py names them.
OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT",)


def project() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def image() -> str:
    """The one image every container runs: the Dockerfile's build, tagged with the version."""
    return f"eventflow:{project()['project']['version']}"


def setting_names() -> set[str]:
    return {s.env for s in SETTINGS.values()}


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p != KUSTOMIZATION)


def manifests() -> list[dict[str, Any]]:
    return [doc for path in manifest_files() for doc in yaml_documents(path)]


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in manifests() if r["kind"] == kind}


def compose() -> dict[str, Any]:
    (document,) = yaml_documents(COMPOSE_FILE)
    return document


def parse_command(args: list[str]) -> argparse.Namespace:
    """``args`` as the image's entry point, the eventflow CLI, would parse them."""
    return build_parser().parse_args(args)


def listen_port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def split_address(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def dockerfile() -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        # Docker drops comment and blank lines, also inside a continued instruction.
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    instructions = []
    for text in logical:
        keyword, _, arguments = text.strip().partition(" ")
        instructions.append(Instruction(keyword.upper(), " ".join(arguments.split())))
    return instructions


def dockerfile_instructions(keyword: str) -> list[str]:
    return [i.arguments for i in dockerfile() if i.keyword == keyword]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for arguments in dockerfile_instructions("ENV"):
        for pair in shlex.split(arguments):
            name, _, value = pair.partition("=")
            env[name] = value
    return env


@dataclass(frozen=True)
class SecretCommand:
    """One `kubectl create secret generic` in deploy/README.md: key -> local file or None."""

    name: str
    sources: dict[str, str | None]


def readme_secrets() -> dict[str, SecretCommand]:
    """The Secrets deploy/README.md tells the operator to create, by name."""
    found: dict[str, SecretCommand] = {}
    for words in readme_commands("kubectl"):
        if "generic" not in words:
            continue
        name = words[words.index("generic") + 1]
        sources: dict[str, str | None] = {}
        for word in words:
            if word.startswith("--from-literal="):
                sources[word.removeprefix("--from-literal=").split("=", 1)[0]] = None
            elif word.startswith("--from-file="):
                key, _, path = word.removeprefix("--from-file=").rpartition("=")
                sources[key or Path(path).name] = path
        found[name] = SecretCommand(name, sources)
    return found


def readme_commands(program: str) -> list[list[str]]:
    """The commands of ``program`` in deploy/README.md's ``sh`` blocks, as argument lists."""
    blocks = re.findall(r"```sh\n(.*?)```", DEPLOY_README.read_text(encoding="utf-8"), re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    commands = [shlex.split(line, comments=True) for line in lines]
    return [words for words in commands if words and words[0] == program]
