"""deploy/Dockerfile builds the project the way the Makefile does and runs `eventflow`."""

from __future__ import annotations

import json
import re
import shlex

from packaging.specifiers import SpecifierSet

from libs.config import Settings
from tests.deploy.files import (
    DEPLOY,
    REPO,
    compose,
    dockerfile_env,
    dockerfile_instructions,
    listen_port,
    project,
)


def _makefile() -> str:
    return (REPO / "Makefile").read_text(encoding="utf-8")


def _makefile_install_steps() -> list[str]:
    """The Makefile's install commands, as the image runs them (no venv, no dev tools)."""
    steps = []
    for line in _makefile().splitlines():
        command = line.strip()
        if "pip install" not in command and "libs.protogen" not in command:
            continue
        command = command.replace("$(BIN)/", "").replace("$(GEN)", "libs/gen")
        command = command.replace("'.[dev]'", ".")
        words = [w for w in shlex.split(command) if w not in ("-q", "--disable-pip-version-check")]
        steps.append(" ".join(words))
    return steps


def _run_steps() -> list[str]:
    return [
        " ".join(step.split()) for run in dockerfile_instructions("RUN") for step in run.split("&&")
    ]


def test_the_entrypoint_is_the_eventflow_console_script() -> None:
    (entrypoint,) = dockerfile_instructions("ENTRYPOINT")
    assert json.loads(entrypoint) == ["eventflow"]
    assert project()["project"]["scripts"]["eventflow"] == "cli.main:main"


def test_the_base_image_is_a_pinned_python_the_project_supports() -> None:
    (base,) = dockerfile_instructions("FROM")
    found = re.fullmatch(r"python:(\d+\.\d+)\.(\d+)-slim-\w+", base)
    assert found, f"{base}: pin the patch release and the Debian release"
    assert found[1] in SpecifierSet(project()["project"]["requires-python"])
    assert f"PYTHON ?= python{found[1]}" in _makefile(), "the image runs the Makefile's Python"


def test_it_installs_the_package_as_the_makefile_does() -> None:
    expected = _makefile_install_steps()
    assert expected == [
        "pip install -e .",
        "python -m libs.protogen protos libs/gen",
        "pip install --no-deps -e .",
    ]
    steps = _run_steps()
    positions = [steps.index(step) for step in expected]
    assert positions == sorted(positions), "same order as the Makefile"


def test_every_dependency_and_the_build_backend_are_pinned() -> None:
    requirements = [
        *project()["project"]["dependencies"],
        *project()["build-system"]["requires"],
    ]
    loose = [r for r in requirements if not re.fullmatch(r"[\w\-\[\]]+==[\w.]+", r)]
    assert not loose, f"the image installs these unpinned: {loose}"


def test_it_copies_everything_the_package_build_reads() -> None:
    copied = {
        source
        for arguments in dockerfile_instructions("COPY")
        for source in shlex.split(arguments)[:-1]
    }
    metadata = project()
    assert {"pyproject.toml", metadata["project"]["readme"], "protos"} <= copied
    includes = metadata["tool"]["setuptools"]["packages"]["find"]["include"]
    generated = "eventflow*"  # the stubs, which the image generates into libs/gen
    assert {pattern.rstrip("*") for pattern in includes if pattern != generated} <= copied
    assert "libs/gen" in metadata["tool"]["setuptools"]["packages"]["find"]["where"]


def test_it_exposes_the_ports_its_settings_listen_on() -> None:
    settings = Settings.load(environ=dockerfile_env())
    (exposed,) = dockerfile_instructions("EXPOSE")
    ports = {listen_port(settings.grpc_listen), listen_port(settings.internal_listen)}
    assert {int(p) for p in exposed.split()} == ports
    assert settings.grpc_listen.startswith("0.0.0.0:"), "reachable from outside the container"
    assert settings.bus == "kafka"


def test_it_runs_as_an_unprivileged_user_who_owns_the_volume_folders() -> None:
    (user,) = dockerfile_instructions("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000, "numeric, so runAsNonRoot can verify it"
    setup = " ".join(dockerfile_instructions("RUN"))
    assert f"--uid {uid}" in setup
    data_dir = dockerfile_env()["EVENTFLOW_DATA_DIR"]
    mounted = {
        volume.split(":")[1]
        for service in compose()["services"].values()
        for volume in service.get("volumes", [])
        if volume.split(":")[1].startswith(data_dir)
    }
    assert mounted, "compose mounts the certificates and key ring under the data dir"
    for folder in mounted:
        assert folder in setup.split("mkdir -p ", 1)[1].split("&&")[0], folder
    assert f"chown -R eventflow:eventflow {data_dir}" in setup


def test_the_build_leaves_local_state_and_generated_stubs_out() -> None:
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert {".venv", ".eventflow", "libs/gen", ".git"} <= set(ignored)
