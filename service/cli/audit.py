"""``ctxpack audit tail|export``: read the audit trail straight from the database.

    ctxpack audit tail [--org NAME] [--action A] [--lines N]
    ctxpack audit export --since 2026-11-01 [--until T] [--action A] [--org NAME] [--format jsonl]

Both print one JSON object per line on stdout, the same shape as ``GET /v1/audit/{id}``.
``--org`` may be left out when the database holds a single org. These are operator tools:
they see the whole org, whatever any key's limits.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from service.cli.common import db_options, with_resources
from service.config import Settings
from service.errors import InvalidInput
from service.schemas.audit import as_utc, iso_only

if TYPE_CHECKING:
    from service.resources import Resources

_TIME = TypeAdapter(datetime)


def time_arg(field: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return as_utc(_TIME.validate_python(iso_only(value)))
    except (ValidationError, ValueError) as exc:
        raise InvalidInput(field, f"--{field}: not an ISO 8601 date or time: {value!r}") from exc


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from service.domain import audit as audit_service

    if args.audit_command == "export":
        since = time_arg("since", args.since)
        until = time_arg("until", args.until)
        if since and until and until <= since:
            raise InvalidInput("until", "--until must be later than --since")

        async def export(resources: Resources) -> int:
            count = 0
            async with resources.runner.operator_session() as session:
                org = await audit_service.resolve_org(session, args.org)
                rows = audit_service.export_audit(
                    session, org.org_id, since=since, until=until, action=args.action
                )
                async for event in rows:
                    _emit(event.model_dump_json())
                    count += 1
            return count

        count = with_resources(settings, export)
        sys.stderr.write(f"exported {count} audit rows\n")
        return 0

    async def tail(resources: Resources) -> int:
        async with resources.runner.operator_session() as session:
            org = await audit_service.resolve_org(session, args.org)
        rows = audit_service.tail_audit(
            resources.sessionmaker,
            org.org_id,
            action=args.action,
            backlog=args.lines,
            poll_seconds=args.interval,
        )
        async for event in rows:
            _emit(event.model_dump_json())
        return 0

    return with_resources(settings, tail)


def add_parsers(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="follow or export the audit trail (JSON lines)",
        description="Read the audit trail from the database: one JSON object per line.",
    )
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")

    tail = audit_sub.add_parser(
        "tail",
        help="print the last rows, then follow new ones (Ctrl-C stops)",
        description="Print the org's last audit rows, then each new row as it is recorded "
        "(polling every --interval seconds).",
    )
    tail.add_argument("--org", help="org name (required when several orgs exist)")
    tail.add_argument("--action", help="only this action, e.g. remember or context")
    tail.add_argument(
        "--lines", type=int, default=10, help="rows of history to print first (default 10)"
    )
    tail.add_argument(
        "--interval", type=float, default=1.0, help="seconds between polls (default 1)"
    )
    db_options(tail)

    export = audit_sub.add_parser(
        "export",
        help="write the rows of a time range to stdout, oldest first",
        description="Write every audit row of the org in [--since, --until) to stdout, oldest "
        "first, one JSON object per line. Times are ISO 8601; without a zone, UTC.",
    )
    export.add_argument("--since", required=True, help="first time included, e.g. 2026-11-01")
    export.add_argument("--until", help="first time excluded (default: now)")
    export.add_argument("--org", help="org name (required when several orgs exist)")
    export.add_argument("--action", help="only this action")
    export.add_argument(
        "--format", choices=["jsonl"], default="jsonl", help="output format (jsonl)"
    )
    db_options(export)
    audit.set_defaults(handler=cmd_audit)

