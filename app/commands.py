"""The `evalbook` subcommands that need the service's modules (imported on demand by app.cli)."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db import build_engine, build_sessionmaker, migrate
from app.services import projects

T = TypeVar("T")
DEMO_PROJECT = "demo/demo"


def database_url(settings: Settings) -> str:
    """The configured database URL, or the embedded server's (started on demand)."""
    if settings.database_url:
        return settings.database_url
    from app.embedded import start_embedded_postgres

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


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Migrate, make sure the demo project exists, print an admin token, serve."""
    import uvicorn

    from app.main import create_app

    url = database_url(settings)
    migrate(url)

    async def demo(session: AsyncSession) -> str:
        project, _ = await projects.create_project(session, DEMO_PROJECT)
        _, secret = await projects.create_token(
            session, project.id, "demo-admin", ["admin"], "runner", "platform_verified"
        )
        return secret

    secret = in_transaction(url, demo)
    settings = settings.model_copy(update={"database_url": url})
    print(f"EvalBook Reports listening on http://{args.host}:{args.port}", flush=True)
    print(f"admin token for {DEMO_PROJECT}: {secret}", flush=True)
    if args.workers > 1:
        # Worker processes build their own app from the environment; hand them the database.
        os.environ["EVALBOOK_DATABASE_URL"] = url
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=args.host,
            port=args.port,
            workers=args.workers,
            log_level=settings.log_level,
        )
    else:
        uvicorn.run(
            create_app(settings), host=args.host, port=args.port, log_level=settings.log_level
        )
    return 0


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    """Apply pending migrations."""
    migrate(database_url(settings))
    print("migrations applied")
    return 0


def cmd_project_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create ORG/PROJECT."""
    url = database_url(settings)
    migrate(url)

    async def create(session: AsyncSession) -> bool:
        _, created = await projects.create_project(session, args.path)
        return created

    created = in_transaction(url, create)
    print(f"{args.path} {'created' if created else 'already exists'}")
    return 0


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create a token and print it alone on one line."""
    url = database_url(settings)
    migrate(url)
    permissions = [p.strip() for p in args.permissions.split(",") if p.strip()]

    async def create(session: AsyncSession) -> str:
        return await projects.create_token_for_path(
            session, args.project, args.name, permissions, args.kind, args.assurance
        )

    print(in_transaction(url, create))
    return 0


def cmd_retention_apply(args: argparse.Namespace, settings: Settings) -> int:
    """Remove example bodies and case outputs older than --older-than days."""
    from contextlib import AsyncExitStack
    from datetime import timedelta

    from app.main import open_object_store
    from app.services import retention

    if args.older_than < 0:
        raise ValueError("--older-than must be zero or more days")
    url = database_url(settings)
    migrate(url)
    settings = settings.model_copy(update={"database_url": url})

    async def run() -> retention.RetentionResult:
        async with AsyncExitStack() as stack:
            engine = build_engine(settings, url)
            stack.push_async_callback(engine.dispose)
            store = await open_object_store(settings, stack)
            return await retention.apply(
                build_sessionmaker(engine), store, timedelta(days=args.older_than)
            )

    result = asyncio.run(run())
    print(
        f"removed {result.bodies} example bodies, {result.outputs} case outputs"
        f" and {result.objects} stored objects older than {args.older_than} days"
    )
    return 0
