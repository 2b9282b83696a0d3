"""The `evalbook` command: serve, migrate, project and token management."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db import build_engine, build_sessionmaker, migrate
from app.errors import ProblemError
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


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    root = argparse.ArgumentParser(prog="evalbook", description="EvalBook Reports")
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="migrate and serve the API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="service processes")
    serve.set_defaults(handler=cmd_serve)
    commands.add_parser("migrate", help="apply pending migrations").set_defaults(
        handler=cmd_migrate
    )
    project = commands.add_parser("project", help="projects").add_subparsers(
        dest="action", required=True
    )
    project_create = project.add_parser("create", help="create ORG/PROJECT")
    project_create.add_argument("path")
    project_create.set_defaults(handler=cmd_project_create)
    token = commands.add_parser("token", help="tokens").add_subparsers(dest="action", required=True)
    token_create = token.add_parser("create", help="create a token")
    token_create.add_argument("--project", required=True)
    token_create.add_argument("--name", required=True)
    token_create.add_argument("--permissions", required=True)
    token_create.add_argument("--kind", default="user", choices=["user", "runner", "peer"])
    token_create.add_argument("--assurance", default=None)
    token_create.set_defaults(handler=cmd_token_create)
    return root


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `evalbook` console script."""
    args = parser().parse_args(argv)
    settings = Settings()
    try:
        code: int = args.handler(args, settings)
        return code
    except (ProblemError, ValueError) as exc:
        print(f"evalbook: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
