"""The ``ctxpack`` command.

    ctxpack serve [--host H] [--port P] [--data-dir D] [--database-url URL] [--no-migrate]
    ctxpack db upgrade|downgrade|current
    ctxpack keys create --org NAME [--project P]... [--namespace PREFIX]... [--scope S]...
    ctxpack keys list [--org NAME]
    ctxpack keys revoke KEY_ID

Every command takes the database options (``--data-dir``, ``--database-url`` and their env
vars ``CTXPACK_DATA_DIR``, ``CTXPACK_DATABASE_URL``) and works while the server is running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from service.config import Settings
from service.errors import CtxpackError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from service.resources import Resources

T = TypeVar("T")

Handler = Callable[[argparse.Namespace, Settings], int]
_EXTRA_COMMANDS: list[Callable[[Any], None]] = []


def db_options(parser: argparse.ArgumentParser) -> None:
    """Add the database options every command takes."""
    parser.add_argument(
        "--data-dir", type=Path, help="embedded Postgres data dir (env CTXPACK_DATA_DIR)"
    )
    parser.add_argument(
        "--database-url",
        help="external PostgreSQL URL instead of the embedded server (env CTXPACK_DATABASE_URL)",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("data_dir", "database_url", "host", "port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if getattr(args, "no_migrate", False):
        overrides["migrate_on_start"] = False
    return Settings(**overrides)


def with_resources(
    settings: Settings, fn: Callable[[Resources], Awaitable[T]], **options: Any
) -> T:
    """Run ``fn`` on the process's resources (``open_resources``), opened for a command: no
    model and no revocation listener unless ``options`` ask for them."""
    from service.resources import open_resources

    options.setdefault("load_embedder", False)
    options.setdefault("listen", False)

    async def main() -> T:
        async with open_resources(settings, **options) as resources:
            return await fn(resources)

    return asyncio.run(main())


def in_session(
    settings: Settings, fn: Callable[[AsyncSession], Awaitable[T]], **options: Any
) -> T:
    """Run ``fn`` in one operator unit of work (committed when it returns)."""

    async def run(resources: Resources) -> T:
        async with resources.runner.operator_session() as session:
            return await fn(session)

    return with_resources(settings, run, **options)


# --- serve ------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from service.app import create_app
    from service.domain.keys import bootstrap_admin_key
    from service.logs import configure_logging
    from service.store.database import upgrade

    configure_logging(settings.log_level)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    url = with_resources(settings, _database_url, check_schema=False)
    if settings.migrate_on_start:
        upgrade(url)
    if settings.print_bootstrap_key:
        created = in_session(
            settings, bootstrap_admin_key, database_url=url, check_schema=False
        )
        if created is not None:
            print(
                "ctxpack: created org 'default' and an admin key. It is shown once; keep it:",
                file=sys.stderr,
            )
            print(created.key, flush=True)
    app = create_app(settings, database_url=url)
    # uvicorn shuts down gracefully on SIGTERM, restores this handler and raises the signal
    # again: exiting through SystemExit (not the default handler's abrupt death) runs atexit,
    # which is where the embedded Postgres is stopped.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    uvicorn.run(app, host=settings.host, port=settings.port, log_config=None, access_log=False)
    return 0


async def _database_url(resources: Resources) -> str:
    return resources.database_url


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# --- db ---------------------------------------------------------------------------------


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from alembic import command

    from service.store.database import alembic_config, downgrade, upgrade

    url = with_resources(settings, _database_url, check_schema=False)
    if args.db_command == "upgrade":
        upgrade(url, args.revision or "head")
    elif args.db_command == "downgrade":
        downgrade(url, args.revision or "-1")
    else:
        command.current(alembic_config(url), verbose=False)
    return 0


# --- keys -------------------------------------------------------------------------------


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    from service.domain import keys as key_service

    if args.keys_command == "create":

        async def create(session: AsyncSession) -> key_service.CreatedKey:
            return await key_service.create_key(
                session,
                org=args.org,
                name=args.name,
                scopes=args.scope,
                projects=args.project,
                namespace_prefixes=args.namespace,
            )

        created = in_session(settings, create)
        print(created.key)
        return 0
    if args.keys_command == "list":

        async def listing(session: AsyncSession) -> list[Any]:
            return await key_service.list_keys(session, args.org)

        rows = in_session(settings, listing)
        print("key_id\torg\tname\tprefix\tscopes\tprojects\tnamespaces\tstatus")
        for key, org_name in rows:
            status = "revoked" if key.revoked_at else "active"
            print(
                f"{key.id}\t{org_name}\t{key.name}\t{key.key_prefix}…\t{','.join(key.scopes)}\t"
                f"{','.join(key.projects) or '*'}\t{','.join(key.namespace_prefixes) or '*'}\t{status}"
            )
        return 0

    async def revoke(session: AsyncSession) -> None:
        await key_service.revoke_key(session, args.key_id)

    in_session(settings, revoke)
    print(f"revoked {args.key_id}", file=sys.stderr)
    return 0


# --- parser -----------------------------------------------------------------------------


def register_command(fn: Callable[[Any], None]) -> None:
    """Let a feature module add a sub-command: ``fn(subparsers)`` adds a parser and sets
    ``handler`` (a ``Handler``) in its defaults."""
    _EXTRA_COMMANDS.append(fn)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxpack",
        description="ctxpack: a Postgres-backed memory service for AI agents.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="run the HTTP service (migrates first; embedded Postgres unless --database-url)",
        description="Run the HTTP API (and MCP at /mcp). Applies migrations first unless "
        "--no-migrate. On an empty database, creates an admin key and prints it once.",
    )
    serve.add_argument("--host", help="bind address (env CTXPACK_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env CTXPACK_PORT, default 8080)")
    serve.add_argument("--no-migrate", action="store_true", help="do not run migrations first")
    db_options(serve)
    serve.set_defaults(handler=cmd_serve)

    db = sub.add_parser("db", help="schema migrations (Alembic)", description="Schema migrations.")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("upgrade", "apply migrations (default: to head)"),
        ("downgrade", "revert migrations (default: one step)"),
        ("current", "show the database's revision"),
    ):
        p = db_sub.add_parser(name, help=help_text, description=help_text)
        if name != "current":
            p.add_argument("revision", nargs="?", help="target revision")
        db_options(p)
    db.set_defaults(handler=cmd_db)

    keys = sub.add_parser("keys", help="create, list and revoke API keys", description="API keys.")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys_sub.add_parser(
        "create",
        help="create a key (and its org if needed); prints the key alone on stdout",
        description="Create an API key. The key is printed alone on stdout, once.",
    )
    create.add_argument("--org", required=True, help="org name (created if missing)")
    create.add_argument("--name", help="a label for the key")
    create.add_argument(
        "--project", action="append", default=[], help="limit to this project (repeatable)"
    )
    create.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="limit to this namespace prefix, e.g. alice or alice:s1 (repeatable)",
    )
    create.add_argument(
        "--scope",
        action="append",
        choices=["read", "write", "admin"],
        help="grant a scope (repeatable; default read and write)",
    )
    db_options(create)
    listing = keys_sub.add_parser("list", help="list keys (never the secrets)")
    listing.add_argument("--org", help="only this org")
    db_options(listing)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    db_options(revoke)
    keys.set_defaults(handler=cmd_keys)

    _load_feature_commands()
    for fn in _EXTRA_COMMANDS:
        fn(sub)
    return parser


def _load_feature_commands() -> None:
    """Import the modules that register extra sub-commands (mcp, audit, bench, lifecycle)."""
    import importlib

    for module in (
        "service.mcp.cli",
        "service.audit_cli",
        "service.bench_cli",
        "service.lifecycle.cli",
    ):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = settings_from(args)
    handler: Handler = args.handler
    try:
        return handler(args, settings)
    except CtxpackError as exc:
        print(f"ctxpack: error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
