"""The `evalbook` subcommands that need the service's modules (declared in app/cli/service.py,
which imports this module only when one of them runs)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.cli.preflight import (
    PreflightFailed,
    require_data_dir,
    require_database,
    require_free_port,
)
from app.platform.config import Settings
from app.platform.db import build_engine, build_sessionmaker, ensure_service_login, migrate
from app.services import projects

T = TypeVar("T")
DEMO_PROJECT = "demo/demo"


class DatabaseRequired(ValueError):
    """No EVALBOOK_DATABASE_URL where the embedded default is turned off."""

    def __init__(self) -> None:
        super().__init__("EVALBOOK_DATABASE_URL is required (EVALBOOK_EMBEDDED_DATABASE is false)")


def database_url(settings: Settings, *, create: bool = False) -> str:
    """The configured database URL, or the embedded server's (started on demand; its data
    directory made only with `create`, else it must exist)."""
    if settings.database_url:
        require_database(settings.database_url, migrated=False)
        return settings.database_url
    if not settings.embedded_database:
        raise DatabaseRequired
    if not create:
        require_data_dir(settings.data_dir)
    from app.platform.embedded import start_embedded_postgres

    return start_embedded_postgres(settings.data_dir)


def in_transaction(url: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `work` in one committed transaction against the database at `url`."""
    settings = Settings(database_url=url)

    async def run() -> T:
        engine = build_engine(settings, url)
        try:
            async with build_sessionmaker(engine)() as session, session.begin():
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(run())


DEMO_TOKEN_FILE = "demo-token"
EMBEDDED_SERVICE_LOGIN = "evalbook"


def _exit_gracefully(signum: int, frame: object) -> None:
    # uvicorn shuts down on SIGTERM and SIGINT, then raises the signal again with the handler
    # it found: this one, so the process exits normally and stops its embedded PostgreSQL
    # (the default SIGTERM action would kill it before that, leaving the server running).
    raise SystemExit(0)


def _demo_token(url: str, data_dir: Path) -> str:
    """Create the demo project and its token once, kept in a file only the owner can read."""

    async def create(session: AsyncSession) -> str:
        project, _ = await projects.create_project(session, DEMO_PROJECT)
        _, secret = await projects.create_token(
            session, project.id, "demo", ["admin"], "user", "reported"
        )
        return secret

    secret = in_transaction(url, create)
    path = data_dir / DEMO_TOKEN_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secret + "\n")
    return secret


def served_url(host: str, port: int) -> str | None:
    """The address `evalbook serve` listens on, as a URL; None when it listens on every
    interface (each request then names the address it reached)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Migrate and serve; on the embedded default, PostgreSQL starts first and stops last."""
    signal.signal(signal.SIGTERM, _exit_gracefully)
    signal.signal(signal.SIGINT, _exit_gracefully)
    if settings.signing_key_file is not None:
        from app.digest.signing import load_private_key

        load_private_key(settings.signing_key_file)  # a bad file: an error naming it, first
    require_free_port(args.host, args.port)
    embedded = None
    if settings.database_url:
        url = settings.database_url
        require_database(url, migrated=not settings.migrate_on_start)
    elif not settings.embedded_database:
        raise DatabaseRequired
    else:
        from app.platform.embedded import EmbeddedPostgres

        embedded = EmbeddedPostgres.start(settings.data_dir)
        url = embedded.url
    try:
        if embedded is not None:
            # The embedded default runs as the service role too: migrated by the owner (unless
            # EVALBOOK_MIGRATE_ON_START=false: then `evalbook migrate` must have run), served
            # by a login with the service role's grants only.
            if settings.migrate_on_start:
                migrate(url)
            else:
                require_database(url, migrated=True)
            provision_first(settings, url)
            url = asyncio.run(ensure_service_login(url, EMBEDDED_SERVICE_LOGIN))
        else:
            migrate_first(settings, url)
            if settings.migrate_on_start:
                provision_first(settings, settings.migration_database_url or url)
        public_url = settings.public_base_url or served_url(args.host, args.port)
        settings = settings.model_copy(update={"database_url": url, "public_base_url": public_url})
        print(f"EvalBook Reports listening on http://{args.host}:{args.port}", flush=True)
        if embedded is not None and embedded.created:
            secret = _demo_token(url, settings.data_dir)
            path = settings.data_dir / DEMO_TOKEN_FILE
            print(f"demo token for {DEMO_PROJECT} (kept in {path}): {secret}", flush=True)
        # The service's own loggers (finish timings, sweep rounds) at the configured level,
        # beside uvicorn's, which configures only its own.
        logging.basicConfig(
            level=settings.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s"
        )
        _run(args, settings, url, public_url)
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def _run(args: argparse.Namespace, settings: Settings, url: str, public_url: str | None) -> None:
    """Run uvicorn: this process's app, or worker processes that build theirs."""
    import uvicorn

    from app.api.main import create_app
    from app.api.serving import PROTOCOL_PATH, HeadLimits, protocol_for

    if args.workers > 1:
        # Worker processes build their own app from the environment: hand them the
        # database and the public address.
        os.environ["EVALBOOK_DATABASE_URL"] = url
        if public_url:
            os.environ["EVALBOOK_PUBLIC_BASE_URL"] = public_url
        uvicorn.run(
            "app.api.main:create_app",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=settings.log_level,
            http=PROTOCOL_PATH,
        )
    else:
        uvicorn.run(
            create_app(settings),
            host=args.host,
            port=args.port,
            log_level=settings.log_level,
            http=protocol_for(HeadLimits.from_settings(settings)),
        )


def migrate_first(settings: Settings, url: str) -> None:
    """Apply pending migrations before a command's work, as the migration role, unless told
    not to (`EVALBOOK_MIGRATE_ON_START=false`: the service role may not migrate)."""
    if settings.migrate_on_start:
        migrate_or_explain(settings.migration_database_url or url)


def migrate_or_explain(url: str) -> None:
    """Apply pending migrations; a refusal (most often: the service's own role, which may not
    create tables) is one line naming what to do."""
    import sqlalchemy.exc

    try:
        migrate(url)
    except sqlalchemy.exc.DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise PreflightFailed(
            f"the migrations were refused ({reason}): run `evalbook migrate` as the tables' "
            "owner, and serve with EVALBOOK_MIGRATE_ON_START=false or with "
            "EVALBOOK_MIGRATION_DATABASE_URL naming the owner"
        ) from None


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    """Apply pending migrations (as EVALBOOK_MIGRATION_DATABASE_URL when set)."""
    migrate_or_explain(settings.migration_database_url or database_url(settings, create=True))
    print("migrations applied")
    return 0


def cmd_project_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create ORG/PROJECT."""
    url = database_url(settings)
    migrate_first(settings, url)

    async def create(session: AsyncSession) -> bool:
        _, created = await projects.create_project(session, args.path)
        return created

    created = in_transaction(url, create)
    print(f"{args.path} {'created' if created else 'already exists'}")
    return 0


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create a token and print it alone on one line."""
    url = database_url(settings)
    migrate_first(settings, url)
    permissions = [p.strip() for p in args.permissions.split(",") if p.strip()]

    async def create(session: AsyncSession) -> str:
        return await projects.create_token_for_path(
            session, args.project, args.name, permissions, args.kind, args.assurance
        )

    print(in_transaction(url, create))
    return 0


def _confirmed(question: str) -> bool:
    """A yes from a person at a terminal; never from a pipe."""
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def cmd_retention_apply(args: argparse.Namespace, settings: Settings) -> int:
    """Remove example bodies and case outputs older than --older-than days: counted first,
    then removed once confirmed (`--yes`, or a yes at the terminal); `--dry-run` only counts."""
    from contextlib import AsyncExitStack
    from datetime import timedelta

    from app.api.main import open_object_store
    from app.services import retention

    if args.older_than < 0:
        raise ValueError("--older-than must be zero or more days")
    url = database_url(settings)
    migrate_first(settings, url)
    settings = settings.model_copy(update={"database_url": url})
    age = timedelta(days=args.older_than)

    async def run(step: Callable[..., Awaitable[T]]) -> T:
        """`step(sessionmaker, store, age)` with the engine and the store open around it."""
        async with AsyncExitStack() as stack:
            engine = build_engine(settings, url)
            stack.push_async_callback(engine.dispose)
            store = await open_object_store(settings, stack)
            return await step(build_sessionmaker(engine), store, age)

    found = asyncio.run(run(retention.preview))
    older = f"older than {args.older_than:g} days"
    if args.dry_run:
        print(f"would remove {found.describe()} {older} (digests and reports stay)")
        return 0
    if not args.yes and not _confirmed(f"remove {found.describe()} {older}?"):
        print(
            f"nothing removed: {found.describe()} {older} would go; pass --yes to remove them",
            file=sys.stderr,
        )
        return 2
    result = asyncio.run(run(retention.apply))
    print(
        f"removed {result.bodies} example bodies, {result.outputs} case outputs"
        f" and {result.objects} stored objects {older}"
    )
    return 0


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    """`evalbook keys init | rotate | rotate-log | list`: every change runs as the database
    owner (EVALBOOK_MIGRATION_DATABASE_URL when set); the service's own login may not."""
    from app.services import signing
    from app.services.provisioning import provision

    url = database_url(settings)
    owner = settings.migration_database_url or url
    if args.action == "list":
        require_database(url, migrated=True)  # a listing changes nothing, not even the schema
    else:
        migrate_first(settings, url)
    settings = settings.model_copy(update={"database_url": url})

    async def run() -> list[dict[str, object]]:
        if args.action in ("init", "rotate-log"):
            made = await provision(owner, settings, rotate_log=args.action == "rotate-log")
            if made.new_log_origin is not None:
                print(f"the log signs as {made.new_log_origin} from now on")
        engine = build_engine(settings, owner if args.action == "rotate" else url)
        try:
            sessionmaker = build_sessionmaker(engine)
            if args.action == "rotate":
                signer = signing.Signer(settings.signing_keys_dir, settings.signing_key_file)
                async with sessionmaker() as session, session.begin():
                    await signing.rotate(session, signer)
            async with sessionmaker() as session:
                document = await signing.public_keys(session)
            keys: list[dict[str, object]] = document["keys"]
            return keys
        finally:
            await engine.dispose()

    keys = asyncio.run(owner_only(run()))
    if not keys:
        print("no signing key yet: `evalbook keys init` (or `evalbook serve`) makes one")
    for key in keys:
        retired = f" (retired {key['retired_at']})" if key["retired_at"] else ""
        print(f"{key['keyid']} {key['status']} since {key['created_at']}{retired}")
    return 0


async def owner_only(work: Awaitable[T]) -> T:
    """Run an owner's step; the service login's refusal is one line naming who may."""
    import asyncpg
    import sqlalchemy.exc

    try:
        return await work
    except (asyncpg.InsufficientPrivilegeError, sqlalchemy.exc.DBAPIError) as exc:
        cause = getattr(exc, "orig", exc)
        if getattr(cause, "sqlstate", None) != "42501" and "42501" not in str(cause):
            raise
        reason = str(cause).strip().splitlines()[0]
        raise PreflightFailed(
            f"refused ({reason}): keys are made by the database owner; run this with "
            "EVALBOOK_MIGRATION_DATABASE_URL (or EVALBOOK_DATABASE_URL) naming the owner"
        ) from None


def cmd_incident_resolve(args: argparse.Namespace, settings: Settings) -> int:
    """`evalbook incidents resolve ID --reason TEXT`, as the database owner (audited)."""
    import getpass

    import asyncpg

    from app.platform.config import to_asyncpg_url, to_plain_url

    url = database_url(settings)
    owner = settings.migration_database_url or url
    require_database(url, migrated=True)

    async def run() -> str:
        connection = await asyncpg.connect(to_plain_url(to_asyncpg_url(owner)))
        try:
            at = await connection.fetchval(
                "SELECT evalbook_resolve_incident($1, $2, $3)",
                args.incident_id,
                f"owner {getpass.getuser()}",
                args.reason,
            )
        except asyncpg.NoDataFoundError:
            raise PreflightFailed(f"no open incident {args.incident_id}") from None
        finally:
            await connection.close()
        return str(at)

    print(f"incident {args.incident_id} resolved at {asyncio.run(owner_only(run()))}")
    return 0


def provision_first(settings: Settings, owner_url: str) -> None:
    """The owner's step before serving: the signing key and the log's key registered."""
    from app.services.provisioning import provision

    asyncio.run(owner_only(provision(owner_url, settings)))
