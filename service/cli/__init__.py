"""The ``ctxpack`` command: one package, an explicit list of commands.

    ctxpack serve | db | keys     cli/core.py
    ctxpack mcp                   cli/mcp.py
    ctxpack audit                 cli/audit.py
    ctxpack bench                 cli/bench.py
    ctxpack ingest | export | import | erase   cli/lifecycle.py

Each module adds its sub-commands with ``add_parsers(sub)``; ``COMMANDS`` lists them in the
order ``ctxpack --help`` shows. Every command takes the database options (``--data-dir``,
``--database-url`` and their env vars) and works while the server is running.
"""

from __future__ import annotations

import argparse
import sys

import psycopg
import sqlalchemy.exc

from service.cli import audit, bench, core, lifecycle, mcp
from service.cli.common import Handler, settings_from
from service.errors import CtxpackError, ServiceUnavailable

COMMANDS = (core, mcp, audit, bench, lifecycle)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxpack",
        description="ctxpack: a Postgres-backed memory service for AI agents.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args, settings_from(args))
    except CtxpackError as exc:
        print(f"ctxpack: error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except (psycopg.OperationalError, sqlalchemy.exc.OperationalError) as exc:
        # A database that cannot be reached (a wrong URL, role or socket, a server down):
        # libpq's own words, one line, no traceback.
        cause = getattr(exc, "orig", None) or exc
        reason = " ".join(str(cause).split()) or type(cause).__name__
        print(f"ctxpack: error: {ServiceUnavailable.code}: database: {reason}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
