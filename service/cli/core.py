"""``ctxpack serve``, ``ctxpack db`` and ``ctxpack keys``.

    ctxpack serve [--host H] [--port P] [--data-dir D] [--database-url URL] [--no-migrate]
    ctxpack db upgrade|downgrade|current|index
    ctxpack db huge-pages [--reserve]
    ctxpack keys create --org NAME [--project P]... [--namespace PREFIX]... [--scope S]...
    ctxpack keys list [--org NAME]
    ctxpack keys revoke KEY_ID

Every command takes the database options (``--data-dir``, ``--database-url`` and their env
vars ``CTXPACK_DATA_DIR``, ``CTXPACK_DATABASE_URL``) and works while the server is running.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from service.cli.common import db_options, in_session, with_resources
from service.config import Settings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from service.resources import Resources

# --- serve ------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from service.app import create_app
    from service.domain.keys import bootstrap_admin_key
    from service.logs import configure_logging
    from service.store.database import libpq_url, upgrade
    from service.store.huge_pages import log_at_start

    configure_logging(settings.log_level)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    url = with_resources(settings, _database_url, check_schema=False)
    if settings.migrate_on_start:
        upgrade(url)
    log_at_start(libpq_url(url), local=settings.embedded)
    if settings.print_bootstrap_key:
        created = in_session(settings, bootstrap_admin_key, database_url=url, check_schema=False)
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


async def _index_namespaces(resources: Resources, rebuild: bool) -> Any:
    from service.domain.namespace_indexes import index_namespaces

    settings = resources.settings
    return await index_namespaces(
        resources.engine,
        settings.exact_scan_max_rows,
        settings.namespace_index_max,
        rebuild=rebuild,
    )


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# --- db ---------------------------------------------------------------------------------


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from alembic import command

    from service.store.database import alembic_config, downgrade, upgrade

    if args.db_command == "index":
        report = with_resources(
            settings, functools.partial(_index_namespaces, rebuild=args.rebuild)
        )
        print(
            f"namespace indexes: {len(report.built)} built, {len(report.dropped)} dropped, "
            f"{len(report.rebuilt)} rebuilt, {len(report.tuned)} tuned"
        )
        return 0
    url = with_resources(settings, _database_url, check_schema=False)
    if args.db_command == "huge-pages":
        return _huge_pages(settings, url, reserve=args.reserve)
    if args.db_command == "upgrade":
        upgrade(url, args.revision or "head")
    elif args.db_command == "downgrade":
        downgrade(url, args.revision or "-1")
    else:
        command.current(alembic_config(url), verbose=False)
    return 0


def _huge_pages(settings: Settings, url: str, *, reserve: bool) -> int:
    """Report whether the database's shared memory is on huge pages; with ``reserve``, grow
    this machine's pool by what the embedded server lacks (store/huge_pages.py)."""
    from service.errors import InvalidInput
    from service.store import huge_pages
    from service.store.database import libpq_url

    local = settings.embedded
    server, pool = huge_pages.observe(libpq_url(url), local=local)
    print(f"shared memory on huge pages: {server.status}")
    if server.needed is not None:
        print(f"huge pages it needs: {server.needed}")
    if pool is not None:
        print(f"this machine's pool: {pool.total} reserved, {pool.free} free, {pool.page_kb} kB each")
    if reserve and not local:
        raise InvalidInput(
            "reserve",
            "--reserve grows this machine's pool for the embedded server; for an external "
            "database reserve the pages on its host (vm.nr_hugepages)",
        )
    more = huge_pages.shortfall(server, pool)
    if reserve and more:
        assert pool is not None  # shortfall is 0 without a pool
        try:
            pool = huge_pages.reserve(more)
        except PermissionError:
            raise InvalidInput(
                "reserve",
                f"writing {huge_pages.NR_HUGEPAGES} needs root: run this as root, or "
                f"sysctl -w vm.nr_hugepages={pool.total + more}",
            ) from None
        print(f"this machine's pool now: {pool.total} reserved, {pool.free} free")
        if huge_pages.shortfall(server, pool):
            print(
                "the kernel reserved fewer pages than asked (its memory is fragmented); "
                "reserving them early after a boot, or in the kernel's command line, works"
            )
            return 1
    hint = huge_pages.advice(server, pool, local=local)
    if hint is not None:
        print(hint)
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


def add_parsers(sub: Any) -> None:
    """``serve``, ``db`` and ``keys``."""

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
        (
            "index",
            "build big namespaces' own indexes now, drop shrunk ones' (the server's job "
            "does it in the background)",
        ),
        (
            "huge-pages",
            "whether Postgres's shared memory is on huge pages, and the pages it needs",
        ),
    ):
        p = db_sub.add_parser(name, help=help_text, description=help_text)
        if name in ("upgrade", "downgrade"):
            p.add_argument("revision", nargs="?", help="target revision")
        if name == "huge-pages":
            p.add_argument(
                "--reserve",
                action="store_true",
                help="grow this machine's huge-page pool (vm.nr_hugepages; needs root) by the "
                "pages the embedded Postgres lacks; it takes them at its next start",
            )
        if name == "index":
            p.add_argument(
                "--rebuild",
                action="store_true",
                help="also rebuild, online, the vector indexes built with other parameters "
                "than this release's (an earlier release's ef_construction 64): faster "
                "inserts into big namespaces, the same recall",
            )
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
