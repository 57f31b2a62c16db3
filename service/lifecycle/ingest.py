"""``ctxpack ingest``: chat histories in, one memory per turn. The CLI face: the targets (a
server over HTTP, or the local database through the call runner), batches, the resume file,
progress and the summary. The formats and what a turn becomes are domain/ingest.py's rules.

Rules of the run:

- A rerun is idempotent by key (``domain/ingest.py:turn_key``): a turn sent again is a keyed
  ``duplicate`` (no model time), and a turn whose text changed under the same id is
  ``updated`` (the old memory is kept as history). Turns already in the resume file with the
  same item are skipped without a call; an edited turn is sent again.
- A turn whose text is already held by another turn's key in its namespace (the same words
  said twice) cannot hold a key of its own: the server refuses it (409, or 422 within a
  batch), and ingest sends it again without its key, where it is an exact ``duplicate`` of
  that memory, as it was before keys (``without_key`` in the summary).
- Batches go through remember's batch path, to a server (``--url`` + key) or the local
  database; each batch is one transaction, so the write gate, redaction and deduplication
  apply as to any write. The outcome of each batch is appended to a resume file before the
  next is sent: Ctrl-C stops between batches (a batch in flight is either committed, and
  found again as duplicates, or not), and the same command resumes.
- ``--links`` sends the even turns of each session first, then the odd ones linked to both
  neighbours (``domain/ingest.py:link_phases``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from service.config import Settings
from service.domain.ingest import (
    Mapping,
    Turn,
    item_of,
    link_phases,
    namespace_of,
    parse_zone,
    read_turns,
)
from service.domain.ingest import neighbours as find_neighbours
from service.errors import CtxpackError, InvalidInput, ServiceUnavailable

# --- targets ----------------------------------------------------------------------------


class Target(Protocol):
    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Store a batch; returns one ``{status, id?, reasons?}`` per item, in order."""
        ...


class HttpTarget:
    """POST /v1/remember/batch on a server, with the key as a Bearer token. Transient
    failures (connection, 5xx, 429) are retried with backoff; a refusal (4xx) stops."""

    def __init__(self, url: str, key: str, retries: int = 5, transport: Any = None) -> None:
        from service.remote import CtxpackHttp

        self.client = CtxpackHttp(url, key, agent="ctxpack-ingest", timeout=600, transport=transport)
        self.retries = retries

    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from service.remote import error_body

        delay = 1.0
        for attempt in range(self.retries + 1):
            try:
                response = await self.client.send("POST", "/v1/remember/batch", json={"items": items})
            except ServiceUnavailable:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code < 400:
                    return list(response.json()["items"])
                if response.status_code not in (429, 502, 503, 504) or attempt == self.retries:
                    raise _Refused(error_body(response))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30)
        raise ServiceUnavailable("unreachable")  # pragma: no cover

    async def close(self) -> None:
        await self.client.aclose()


class _Refused(CtxpackError):
    status_code = 400
    code = "refused"

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(
            f"the server refused a batch: {error.get('code')}: {error.get('message')}",
            **({"field": error["field"]} if "field" in error else {}),
        )
        self.code = str(error.get("code") or "refused")  # type: ignore[misc]


class LocalTarget:
    """remember's batch path on the local database, one transaction per batch, as an
    operator of one org, through the call runner (a failed batch is audited, transport
    ``cli``)."""

    def __init__(self, resources: Any, caller: Any) -> None:
        self.resources = resources
        self.caller = caller

    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from pydantic import ValidationError

        from service import operations
        from service.calls import Transport
        from service.schemas.memories import RememberBatchRequest

        try:
            request = RememberBatchRequest.model_validate({"items": items})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidInput(where, first["msg"]) from None
        # Through the call runner, as every face: one unit of work, the domain's audit row on
        # success and the runner's (transport ``cli``) when the batch fails.
        op = operations.REMEMBER_BATCH
        response = await self.resources.runner.run(
            self.caller,
            op.action,
            lambda session, caller, ctx: op.answer(self.resources, session, caller, ctx, request),
            transport=Transport.CLI,
        )
        return [r.model_dump(mode="json") for r in response.items]

    async def close(self) -> None:
        return None


# --- the run ----------------------------------------------------------------------------


@dataclass
class IngestSummary:
    turns: int = 0
    created: int = 0
    updated: int = 0  # an edited turn: the memory under its key replaced (history kept)
    duplicate: int = 0
    without_key: int = 0  # a turn whose text another turn's key holds: sent without its key
    rejected: Counter[str] = field(default_factory=Counter)
    # Turns the server refused as input (``invalid_<field>``): skipped and counted.
    invalid: Counter[str] = field(default_factory=Counter)
    # Turns whose timestamp could not be read: stored without valid_at, counted (a sample).
    unparsed_timestamps: int = 0
    unparsed_samples: list[str] = field(default_factory=list)
    resumed: int = 0  # already done in an earlier run (from the resume file)
    interrupted: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "created": self.created,
            "updated": self.updated,
            "duplicate": self.duplicate,
            "without_key": self.without_key,
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "invalid": sum(self.invalid.values()),
            "invalid_by_field": dict(sorted(self.invalid.items())),
            "unparsed_timestamps": self.unparsed_timestamps,
            "unparsed_samples": self.unparsed_samples,
            "skipped_already_done": self.resumed,
            "interrupted": self.interrupted,
            "seconds": round(self.seconds, 1),
        }

    def text(self) -> str:
        lines = [
            f"turns: {self.turns}  created: {self.created}  updated: {self.updated}  "
            f"duplicate: {self.duplicate}  rejected: {sum(self.rejected.values())}  "
            f"already done: {self.resumed}  ({self.seconds:.1f} s)"
        ]
        if self.without_key:
            lines.append(f"  without a key (text held by another turn's key): {self.without_key}")
        for reason, n in sorted(self.rejected.items(), key=lambda kv: -kv[1]):
            lines.append(f"  rejected {reason}: {n}")
        if self.unparsed_timestamps:
            lines.append(
                f"timestamps not understood (stored without a date): {self.unparsed_timestamps}"
                f", e.g. {', '.join(repr(x) for x in self.unparsed_samples)}"
                " (see --date-order, --timezone)"
            )
        if self.invalid:
            lines.append(f"skipped as invalid input: {sum(self.invalid.values())}")
        for reason, n in sorted(self.invalid.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {reason}: {n}")
        if self.interrupted:
            lines.append("interrupted: run the same command again to resume")
        return "\n".join(lines)


class Checkpoint:
    """The resume file: one JSON line per finished turn, ``{x: external id, s: status, id,
    r: reasons, h: fingerprint of the item sent}``, appended and flushed after each batch.
    A turn is done when its id is there with the same fingerprint (or none, in a file
    written before fingerprints): an edited turn is sent again."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            with path.open(encoding="utf-8") as f:
                for raw in f:
                    try:
                        row = json.loads(raw)
                    except json.JSONDecodeError:
                        continue  # a line cut by a crash: that batch is sent again
                    self.done[row["x"]] = row
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def is_done(self, external_id: str, fingerprint: str) -> bool:
        row = self.done.get(external_id)
        return row is not None and row.get("h", fingerprint) == fingerprint

    def record(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.done[row["x"]] = row
        if self._file is not None:
            self._file.write("".join(json.dumps(r) + "\n" for r in rows))
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fingerprint(item: dict[str, Any]) -> str:
    """A short digest of a turn's remember item (before links): what the resume file
    compares, so a turn edited since it was sent is sent again."""
    return hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()[:16]


_ITEM_FIELD = re.compile(r"^items\.(\d+)\.(.+)$")


def invalid_result(field_name: str) -> dict[str, Any]:
    """The outcome of a turn the server refused as input (a time past year 9999, a session
    name holding a secret): skipped, counted under ``invalid_<field>``, never sent again for
    the same item (the resume file records it), and the run goes on."""
    return {"status": "invalid", "reasons": [{"code": f"invalid_{field_name}"}]}


async def send_keyed(
    target: Target, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], set[int]]:
    """Send a batch of keyed items; returns the results in order and the indexes of the
    items sent without their key.

    remember refuses a keyed item whose content is already held by another key in its
    namespace (409 ``conflict``, or 422 when two items of the batch hold the same text),
    naming ``items.<n>.content``: two turns that said the same words. That item is taken out
    and the rest sent again (the refusal stored nothing); the items taken out are then sent
    without their key, where each is an exact duplicate of the memory holding its text, as
    every turn was before keys. Any other 422 naming one item (``items.<n>.<field>``) takes
    that item out as ``invalid`` (``invalid_result``): one bad turn never stops a run. A
    batch over the server's text bound (413) is sent in halves. A refusal naming no item is
    raised."""
    pending = list(range(len(items)))
    deferred: list[int] = []  # to send again without their key
    unkeyed: set[int] = set()  # sent without their key (here or in a half)
    results: dict[int, dict[str, Any]] = {}
    while pending:
        try:
            sent = await target.send([items[i] for i in pending])
        except CtxpackError as exc:
            if exc.code == "payload_too_large" and len(pending) > 1:
                half = len(pending) // 2
                for part in (pending[:half], pending[half:]):
                    out, part_unkeyed = await send_keyed(target, [items[i] for i in part])
                    results.update(zip(part, out, strict=True))
                    unkeyed.update(part[i] for i in part_unkeyed)
                break
            where = _ITEM_FIELD.match(str(exc.details.get("field", "")))
            if exc.code not in ("conflict", "validation_error") or where is None:
                raise
            position = int(where.group(1))
            if position >= len(pending):
                raise
            index = pending.pop(position)
            if where.group(2) == "content" and "key" in items[index]:
                deferred.append(index)
            elif exc.code == "validation_error":
                results[index] = invalid_result(where.group(2))
            else:
                raise
            continue
        results.update(zip(pending, sent, strict=True))
        break
    if deferred:
        bare = [{k: v for k, v in items[i].items() if k != "key"} for i in deferred]
        out, _ = await send_keyed(target, bare)
        results.update(zip(deferred, out, strict=True))
        unkeyed.update(deferred)
    return [results[i] for i in range(len(items))], unkeyed


async def ingest(
    turns: list[Turn],
    target: Target,
    mapping: Mapping,
    fmt: str,
    *,
    checkpoint: Checkpoint,
    summary: IngestSummary,
    batch_size: int = 250,
    links: bool = False,
    progress: Any = None,
) -> IngestSummary:
    """Send every turn not yet in ``checkpoint``, ``batch_size`` at a time; ``summary`` is
    updated after each batch (so an interrupted run still reports what it did)."""
    started = time.monotonic()
    summary.turns = len(turns)
    seen: set[str] = set()
    unique: list[Turn] = []
    for t in turns:  # a turn listed twice in a file is one turn
        if t.external_id not in seen:
            seen.add(t.external_id)
            unique.append(t)
    neighbours = find_neighbours(unique) if links else {}
    # The namespace template itself must be valid (a usage error stops the run); a turn
    # whose own data makes its item invalid (a session name holding a secret) is skipped.
    namespace_of(Turn("template", ""), Mapping(mapping.namespace, sessions="metadata"))
    built: dict[str, dict[str, Any]] = {}
    refused: dict[str, str] = {}
    for t in unique:
        try:
            built[t.external_id] = item_of(t, mapping, fmt)
        except InvalidInput as exc:
            refused[t.external_id] = str(exc.details.get("field") or "turn")
            continue
        if t.timestamp not in (None, "") and "valid_at" not in built[t.external_id]:
            summary.unparsed_timestamps += 1
            if len(summary.unparsed_samples) < 3:
                summary.unparsed_samples.append(str(t.timestamp)[:40])
    prints = {
        x: fingerprint(built[x]) if x in built else fingerprint({"x": x, "invalid": refused[x]})
        for x in (t.external_id for t in unique)
    }
    todo = [t for t in unique if not checkpoint.is_done(t.external_id, prints[t.external_id])]
    summary.resumed = len(unique) - len(todo)
    skipped = [t for t in todo if t.external_id in refused]
    if skipped:
        for t in skipped:
            summary.invalid.update(invalid_result(refused[t.external_id])["reasons"][0].values())
        checkpoint.record(
            [{"x": t.external_id, "s": "invalid", "id": None,
              "r": [f"invalid_{refused[t.external_id]}"], "h": prints[t.external_id]}
             for t in skipped]
        )
        todo = [t for t in todo if t.external_id not in refused]
    if progress is not None:
        progress.set_total(len(todo))
    try:
        for phase in link_phases(todo, links):
            for start in range(0, len(phase), batch_size):
                chunk = phase[start : start + batch_size]
                items = [dict(built[t.external_id]) for t in chunk]
                if links:
                    for t, item in zip(chunk, items, strict=True):
                        if t.position % 2 == 0:
                            continue
                        related = []
                        prev, nxt = neighbours.get(t.external_id, (None, None))
                        for other, rel in ((prev, "follows"), (nxt, "precedes")):
                            done = checkpoint.done.get(other) if other else None
                            if done and done.get("id"):
                                related.append({"id": done["id"], "relationship": rel})
                        if related:
                            item["related"] = related
                results, unkeyed = await send_keyed(target, items)
                summary.without_key += len(unkeyed)
                rows = []
                for t, result in zip(chunk, results, strict=True):
                    status = result["status"]
                    reasons = [r["code"] for r in result.get("reasons") or []]
                    rows.append({"x": t.external_id, "s": status, "id": result.get("id"), "r": reasons,
                                 "h": prints[t.external_id]})
                    if status == "created":
                        summary.created += 1
                    elif status == "updated":
                        summary.updated += 1
                    elif status == "duplicate":
                        summary.duplicate += 1
                    elif status == "invalid":
                        summary.invalid.update(reasons)
                    else:
                        summary.rejected.update(reasons or ["rejected"])
                checkpoint.record(rows)
                if progress is not None:
                    progress.update(
                        len(chunk), created=summary.created, updated=summary.updated, dup=summary.duplicate,
                        rejected=sum(summary.rejected.values()),
                    )
    except (KeyboardInterrupt, asyncio.CancelledError):
        summary.interrupted = True
        raise
    finally:
        summary.seconds = time.monotonic() - started
    return summary


def default_checkpoint(file: str, target: str, mapping: Mapping, links: bool) -> Path:
    import platformdirs

    ident = json.dumps(
        [os.path.abspath(file) if file != "-" else "-", target, mapping.namespace,
         mapping.sessions, mapping.speaker_in, mapping.type, links]
    )
    name = hashlib.sha256(ident.encode()).hexdigest()[:16] + ".jsonl"
    return Path(platformdirs.user_cache_dir("ctxpack")) / "ingest" / name


def run_ingest_command(
    args: argparse.Namespace, settings: Settings
) -> int:
    """The body of ``ctxpack ingest`` (see the module docstring)."""
    from service.lifecycle.progress import Progress

    if args.batch_size < 1 or args.batch_size > settings.max_batch_items:
        raise InvalidInput("batch-size", f"--batch-size must be 1..{settings.max_batch_items}")
    text = sys.stdin.read() if args.file == "-" else _read(Path(args.file))
    fmt, turns = read_turns(text, args.format)
    mapping = Mapping(
        args.namespace, args.sessions, args.speaker_in, args.type,
        date_order=args.date_order, zone=parse_zone(args.timezone),
    )
    # A bad --namespace template fails before anything is sent (a bad turn does not).
    namespace_of(Turn("template", ""), Mapping(mapping.namespace, sessions="metadata"))
    from service.remote import api_key_from_env

    key = args.key or api_key_from_env()
    if args.url and not key:
        raise InvalidInput(
            "key", "--url needs --key (or CTXPACK_API_KEY): a key with the write scope"
        )
    target_id = args.url or settings.database_url or str(settings.data_dir)
    ck_path = args.checkpoint or default_checkpoint(args.file, target_id, mapping, args.links)
    if args.restart and ck_path.exists():
        ck_path.unlink()
    summary = IngestSummary()
    checkpoint = Checkpoint(ck_path)
    sys.stderr.write(
        f"ingest: {len(turns)} turns ({fmt}) -> {args.url or 'local database'}; resume file {ck_path}\n"
    )

    async def run() -> None:
        target: Any
        if args.url:
            target = HttpTarget(args.url, key or "")
            try:
                with Progress("ingest", None, unit="turn") as progress:
                    await ingest(turns, target, mapping, fmt, checkpoint=checkpoint, summary=summary,
                                 batch_size=args.batch_size, links=args.links, progress=progress)
            finally:
                await target.close()
            return
        from service.domain.audit import resolve_org
        from service.lifecycle.local import open_local, operator

        async with open_local(settings) as res:
            async with res.runner.operator_session() as session:
                org = await resolve_org(session, args.org)
            target = LocalTarget(res, operator(org.org_id))
            with Progress("ingest", None, unit="turn") as progress:
                await ingest(turns, target, mapping, fmt, checkpoint=checkpoint, summary=summary,
                             batch_size=args.batch_size, links=args.links, progress=progress)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        summary.interrupted = True
        _report(summary)
        return 130
    finally:
        checkpoint.close()
    _report(summary)
    return 0


def _report(summary: IngestSummary) -> None:
    """The summary: readable on stderr, one JSON object on stdout."""
    sys.stderr.write(summary.text() + "\n")
    sys.stdout.write(json.dumps(summary.as_dict()) + "\n")
    sys.stdout.flush()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput("file", f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise InvalidInput("file", f"{path} is not UTF-8 text") from None


__all__ = [
    "Checkpoint",
    "HttpTarget",
    "IngestSummary",
    "LocalTarget",
    "ingest",
    "run_ingest_command",
    "send_keyed",
]
