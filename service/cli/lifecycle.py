"""``ctxpack ingest|export|import|erase``: argument wiring only; the work is in
service/lifecycle/ (ingest, transfer) and domain/erase.py.

    ctxpack ingest FILE --namespace NS [--format auto|openai|locomo|jsonl] [--url U --key K]
    ctxpack export [--org NAME] [--namespace NS] [--since T] [--with-vectors] [-o FILE]
    ctxpack import FILE --org NAME [--reembed]
    ctxpack erase --namespace NS [--org NAME] [--yes]

Without ``--url``, ingest works on the local database (``--data-dir`` / ``--database-url``),
like every other command; export, import and erase always do (operator tools: the whole org).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from service.cli.common import db_options
from service.config import Settings
from service.errors import InvalidInput


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")


def _since(value: str | None) -> Any:
    from service.cli.audit import time_arg

    return time_arg("since", value)


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from service.domain.namespaces import parse_namespace
    from service.lifecycle.local import open_local
    from service.lifecycle.progress import Progress
    from service.lifecycle.transfer import export_store

    namespace = parse_namespace(args.namespace) if args.namespace else None
    since = _since(args.since)

    async def run() -> Any:
        async with open_local(settings, with_embedder=False) as res:
            out = sys.stdout if args.output in (None, "-") else open(args.output, "w", encoding="utf-8")
            try:
                with Progress("export", None, unit="memory") as progress:
                    return await export_store(
                        res, out, org=args.org, namespace=namespace, since=since,
                        with_vectors=args.with_vectors, progress=progress,
                    )
            finally:
                if out is not sys.stdout:
                    out.close()

    summary = asyncio.run(run())
    _err(f"exported {summary.memories} memories, {summary.artifacts} artifacts")
    return 0


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from service.lifecycle.local import open_local
    from service.lifecycle.progress import Progress
    from service.lifecycle.transfer import import_store

    path = Path(args.file)
    if not path.is_file():
        raise InvalidInput("file", f"no such file: {path}")

    async def run() -> Any:
        async with open_local(settings) as res:
            with Progress("import", None, unit="memory") as progress:
                return await import_store(res, path, org=args.org, reembed=args.reembed, progress=progress)

    summary = asyncio.run(run())
    _out(json.dumps(summary.as_dict()))
    return 0


def cmd_erase(args: argparse.Namespace, settings: Settings) -> int:
    from service import operations
    from service.calls import Transport
    from service.domain.audit import resolve_org
    from service.domain.namespaces import parse_namespace
    from service.lifecycle.local import open_local, operator
    from service.schemas.lifecycle import NamespaceRef

    namespace = parse_namespace(args.namespace)
    if not args.yes:
        if not sys.stdin.isatty():
            raise InvalidInput("yes", "erasing cannot be undone: pass --yes to confirm")
        answer = input(f"Erase namespace {namespace!r} and everything under it? Type it again: ")
        if answer.strip() != namespace:
            _err("not erased")
            return 1

    async def run() -> Any:
        async with open_local(settings, with_embedder=False) as res:
            async with res.runner.operator_session() as session:
                org = await resolve_org(session, args.org)
            # Through the call runner, as every face: one unit of work, and an audit row
            # (transport ``cli``) when the erase fails as well as when it succeeds.
            op, ref = operations.ERASE_NAMESPACE, NamespaceRef(namespace=namespace)
            return await res.runner.run(
                operator(org.org_id),
                op.action,
                lambda session, caller, ctx: op.answer(res, session, caller, ctx, ref),
                transport=Transport.CLI,
            )

    _out(asyncio.run(run()).model_dump_json())
    return 0


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from service.lifecycle.ingest import run_ingest_command

    return run_ingest_command(args, settings)


def add_parsers(sub: Any) -> None:
    ingest = sub.add_parser(
        "ingest",
        help="load chat histories as memories (one per turn), with progress; a rerun resumes",
        description="Load a chat history file as memories, one per turn: OpenAI-style message "
        "lists, LoCoMo JSON, or JSONL of {text, speaker, timestamp, session}. Through the "
        "batch API (--url, --key) or into the local database. A rerun skips what is in.",
    )
    ingest.add_argument("file", help="the file to load (- for stdin)")
    ingest.add_argument(
        "--namespace", required=True,
        help="where the turns go; may use {conversation}, e.g. 'locomo-{conversation}'",
    )
    ingest.add_argument(
        "--format", choices=["auto", "openai", "locomo", "jsonl"], default="auto",
        help="input format (default: detected)",
    )
    ingest.add_argument(
        "--sessions", choices=["namespace", "metadata"], default="namespace",
        help="a session becomes a session namespace NS:<session> (default) or only metadata",
    )
    ingest.add_argument("--type", default="episode", help="memory type of each turn (default episode)")
    ingest.add_argument(
        "--speaker-in", choices=["content", "metadata"], default="content",
        help="'Speaker: text' as content (default), or the text alone with the speaker in metadata",
    )
    ingest.add_argument(
        "--links", action="store_true",
        help="link consecutive turns of a session (follows/precedes), as the LoCoMo benchmark does",
    )
    ingest.add_argument(
        "--date-order", choices=["auto", "dmy", "mdy", "ymd"], default="auto",
        help="which of two small numbers is the day in a timestamp like 03.04.2023: dmy, mdy, "
        "ymd, or auto (default: dots day first, slashes month first, as people write them)",
    )
    ingest.add_argument(
        "--timezone", default="UTC",
        help="time zone of timestamps that name none: an IANA name (Europe/Lisbon) or +HH:MM "
        "(default UTC)",
    )
    ingest.add_argument("--batch-size", type=int, default=250, help="turns per batch call (default 250)")
    ingest.add_argument("--url", help="a ctxpack server (else: the local database)")
    ingest.add_argument("--key", help="API key with write scope (with --url; env CTXPACK_API_KEY)")
    ingest.add_argument("--org", help="org of the local database (when several exist)")
    ingest.add_argument(
        "--checkpoint", type=Path,
        help="resume file (default: under the user cache dir, one per file and target)",
    )
    ingest.add_argument("--restart", action="store_true", help="ignore the resume file")
    db_options(ingest)
    ingest.set_defaults(handler=cmd_ingest)

    export = sub.add_parser(
        "export",
        help="write the store as versioned JSON lines (streams; progress on stderr)",
        description="Export memories (every field, relations, supersession, artifacts) as "
        "JSON lines: a header, one line per memory, one per artifact, a trailer.",
    )
    export.add_argument("--org", help="org name (required when several orgs exist)")
    export.add_argument("--namespace", help="only this namespace and everything under it")
    export.add_argument("--since", help="only memories created or changed since (ISO 8601)")
    export.add_argument("--with-vectors", action="store_true", help="include the embeddings")
    export.add_argument("-o", "--output", help="output file (default stdout)")
    db_options(export)
    export.set_defaults(handler=cmd_export)

    imp = sub.add_parser(
        "import",
        help="read an export back (idempotent by id; redaction and the write gate apply)",
        description="Import a ctxpack export into an org. Vectors are kept when the file's "
        "model and dims match this server's, else memories are embedded again.",
    )
    imp.add_argument("file", help="an export file")
    imp.add_argument("--org", required=True, help="target org (created if missing)")
    imp.add_argument("--reembed", action="store_true", help="embed again even when vectors match")
    db_options(imp)
    imp.set_defaults(handler=cmd_import)

    erase = sub.add_parser(
        "erase",
        help="erase a namespace and everything under it (one transaction); prints the receipt",
        description="Erase a namespace subtree: memories, embeddings, relations, artifacts and "
        "keys limited to it. Audit rows keep only ids. Prints the deletion receipt as JSON.",
    )
    erase.add_argument("--namespace", required=True, help="e.g. alice (a whole user) or alice:s1")
    erase.add_argument("--org", help="org name (required when several orgs exist)")
    erase.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    db_options(erase)
    erase.set_defaults(handler=cmd_erase)

