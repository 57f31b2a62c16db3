"""``ctxpack export`` and ``ctxpack import``: a store as versioned JSON lines, and back.

The file's rules (its lines, what import refuses before writing, what a line becomes, the
hash it is stored under) live in domain/transfer.py; this module runs them on the store.

Format (version 1), one JSON object per line:

- a header: ``{"kind": "header", "format": "ctxpack-export", "version": 1, "model", "dims",
  "exported_at", "org", "filters", "with_vectors", "memories"}``;
- one line per memory, oldest first: ``{"kind": "memory", ...}`` with every column (id,
  namespace, type, name, content, content_hash, project, domain, agent_id, tags, source,
  origin, url, valid_at, created_at, updated_at, superseded_by, expires_at, metadata, key), its
  outgoing ``relations`` (``{id, target_id, relationship, created_at}``), the ids of its
  ``artifact_ids``, and ``embedding`` only with ``--with-vectors``;
- one line per artifact: ``{"kind": "artifact", ...}`` (id, namespace, name, summary, body,
  size_bytes, schema_keys, project, memory_id, created_at);
- a trailer: ``{"kind": "end", "memories": n, "artifacts": m}`` (a file without it was cut).

Export streams through a server-side cursor, so memory stays flat whatever the size.

Both commands run through the call runner (``service/calls.py``) as the org's operator, with
transport ``cli``, like ``ctxpack erase``: one unit of work each, an audit row (action
``export`` / ``import``) on success, and the runner's failure row (``details.transport``
``cli``) when one fails.

Import rules:

- One transaction: an import that fails anywhere (a refused file, an embedder or database
  failure half-way) writes nothing but the runner's failure row; a rerun starts over, and
  an import run twice adds nothing the second time (idempotence below).
- Idempotent by id: a memory or artifact whose id is already in the org is skipped; one
  whose content is already in its namespace (under another id) is a duplicate, skipped.
- Idempotent by key: a current memory (not superseded in the file) whose key is held by a
  current memory of its namespace in the org (under another id) is not inserted: with the
  same content it is a ``duplicate``; with other content it is a ``conflict``, skipped and
  counted (a sample of them listed), and the org's memory is left as it is. Import only adds:
  it never replaces what the org holds, unless the file itself says the holder was replaced
  (the holder's id is in the file, superseded): then the file's newer version is inserted
  and supersedes it, as it did where the file came from. Superseded versions are history
  (the key is unique among current memories only) and come in with their key.
- Keys are set in a third pass, once every supersession is in: every memory is inserted
  without its key, then takes it if it is superseded or no current memory of its namespace
  holds it (so a chain's order in the file does not matter, and a rerun after an
  interruption sets the keys it had not set).
- Every memory goes through remember's write path first: redaction, then the write gate
  (rejections are counted by reason, not stored).
- Vectors are kept when the file has them and its model and dims are the server's (and
  redaction changed nothing); otherwise the memory is embedded again.
- Ids, times (created, updated, valid, expires), relations and supersession are kept.
  Relations and supersession go in a second pass over the file, once every memory is in.
- Nothing the service derives is taken from the file: content hashes (an artifact memory's
  from its artifact's id), an artifact's schema keys and size (from its redacted body), every
  text redacted. What remember refuses, import refuses: a time the database cannot give back
  (past year 9999 in UTC), a relation label or project that is not a slug or holds a secret,
  a non-finite number, a vector of the wrong size, a line with more text than one write may
  scan (``max_scanned_bytes``: 413 naming the line and the field). The whole file is checked
  first (``check_file``): a bad line anywhere writes nothing. The file is checked before the
  org is created, so a refused file into a new org leaves no org (and so no audit row: there
  is no org to hold it); into an existing org, the refusal is the runner's failure row.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from service import operations
from service.calls import Transport
from service.config import Settings
from service.domain.audit import AuditContext, record
from service.domain.auth import Caller
from service.domain.transfer import (
    DROPPED_COLUMNS,
    FORMAT,
    VERSION,
    artifact_row,
    check_file,
    chunks,
    encode_line,
    key_of,
    memory_request,
    read_header,
    records,
    stored_hash,
    time_of,
    uuid_of,
)
from service.domain.writes.plan import WritePlan, plan_import
from service.domain.writes.prepare import WriteItem
from service.errors import CtxpackError, InvalidInput
from service.lifecycle.local import LocalResources, model_id, operator
from service.lifecycle.progress import Progress
from service.schemas.memories import RememberRequest
from service.store.keys import KeyRepository
from service.store.lifecycle import LifecycleRepository
from service.store.memories import MemoryRepository

IMPORT_CHUNK = 256


@dataclass
class ExportSummary:
    memories: int = 0
    artifacts: int = 0


async def export_store(
    resources: LocalResources,
    out: TextIO,
    *,
    org: str | None,
    namespace: str | None = None,
    since: datetime | None = None,
    with_vectors: bool = False,
    progress: Progress | None = None,
) -> ExportSummary:
    """Write the org's memories (optionally a namespace subtree, changed since a time) to
    ``out`` in the format above.

    Raises:
        NotFound / InvalidInput: no such org, or several orgs and none named.
    """
    from service.domain.audit import resolve_org

    async with resources.runner.operator_session() as session:
        org_row = await resolve_org(session, org)
    op = operations.EXPORT

    async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ExportSummary:
        ctx.namespace = namespace
        ctx.request = {"namespace": namespace, "since": since.isoformat() if since else None,
                       "with_vectors": with_vectors}
        summary = await _export(resources.settings, session, caller, org_row.name, out,
                                namespace=namespace, since=since, with_vectors=with_vectors,
                                progress=progress)
        await record(session, ctx, outcome="ok", status_code=200,
                     details={"memories": summary.memories, "artifacts": summary.artifacts})
        return summary

    # Through the call runner, as every face: one unit of work, and an audit row (transport
    # ``cli`` on a failure's) whether the export succeeds or fails. Not ``read_only``: a
    # one-shot command's row is written in its own transaction, never left to a read-audit
    # queue (domain/audit/read_queue.py) of a process about to exit.
    return await resources.runner.run(operator(org_row.org_id), op.action, run, transport=Transport.CLI)


async def _export(
    settings: Settings,
    session: AsyncSession,
    caller: Caller,
    org_name: str,
    out: TextIO,
    *,
    namespace: str | None,
    since: datetime | None,
    with_vectors: bool,
    progress: Progress | None,
) -> ExportSummary:
    summary = ExportSummary()
    repo = LifecycleRepository(session)
    total = await repo.count_memories(caller.org_id, namespace=namespace, since=since)
    if progress is not None:
        progress.set_total(total)
    out.write(
        encode_line(
            {
                "kind": "header",
                "format": FORMAT,
                "version": VERSION,
                "model": model_id(settings),
                "dims": settings.embedding_dims,
                "exported_at": datetime.now(UTC),
                "org": org_name,
                "filters": {"namespace": namespace, "since": since},
                "with_vectors": with_vectors,
                "memories": total,
            }
        )
    )
    # aclosing: a failed write closes the server-side cursor at once, not when collected.
    rows = repo.stream_memories(caller.org_id, namespace=namespace, since=since, with_vectors=with_vectors)
    async with contextlib.aclosing(rows):
        async for row in rows:
            line = {"kind": "memory", **{k: v for k, v in row.items() if k not in DROPPED_COLUMNS}}
            out.write(encode_line(line))
            summary.memories += 1
            if progress is not None:
                progress.update()
    artifacts = repo.stream_artifacts(caller.org_id, namespace=namespace, since=since)
    async with contextlib.aclosing(artifacts):
        async for row in artifacts:
            out.write(encode_line({"kind": "artifact", **{k: v for k, v in row.items() if k not in DROPPED_COLUMNS}}))
            summary.artifacts += 1
    out.write(encode_line({"kind": "end", "memories": summary.memories, "artifacts": summary.artifacts}))
    out.flush()
    return summary


# --- import ---------------------------------------------------------------------------


CONFLICT_SAMPLE = 20


@dataclass
class ImportSummary:
    created: int = 0
    existing: int = 0
    duplicate: int = 0
    conflict: int = 0  # its key held in the org by a current memory with other content
    conflicts: list[dict[str, str]] = field(default_factory=list)  # the first CONFLICT_SAMPLE
    keys: int = 0  # keys set (second pass)
    rejected: Counter[str] = field(default_factory=Counter)
    reembedded: int = 0
    relations: int = 0
    artifacts: int = 0
    complete: bool = False
    # For the import's audit row, as a batch's row has them: the secrets redaction replaced
    # (in the memories it prepared and the artifacts it stored) and the memories it stored.
    redactions: int = 0
    stored: list[uuid.UUID] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "existing": self.existing,
            "duplicate": self.duplicate,
            "conflict": self.conflict,
            "conflicts": self.conflicts,
            "keys_set": self.keys,
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "reembedded": self.reembedded,
            "relations": self.relations,
            "artifacts": self.artifacts,
            "redactions": self.redactions,
            "complete_file": self.complete,
        }


@dataclass
class CheckedFile:
    """An export file read through once before anything is written (``check_file``)."""

    header: dict[str, Any]
    keep_vectors: bool
    replaced: set[uuid.UUID]  # the file's superseded keyed memories (module docstring)


def check_import(settings: Settings, path: Path, *, reembed: bool) -> CheckedFile:
    """The header, whether the file's vectors are kept, and the whole file checked.

    Raises:
        InvalidInput: not a ctxpack export, another version, a line import would refuse.
        PayloadTooLarge: a line with more text than one write may scan.
    """
    header = read_header(path)
    keep_vectors = (
        not reembed
        and header.get("model") == model_id(settings)
        and header.get("dims") == settings.embedding_dims
    )
    dims = header.get("dims") if keep_vectors else None
    return CheckedFile(header, keep_vectors, check_file(path, dims, settings.max_scanned_bytes))


async def _import_memories(
    resources: LocalResources,
    session: AsyncSession,
    caller: Caller,
    chunk: list[tuple[int, dict[str, Any]]],
    keep_vectors: bool,
    summary: ImportSummary,
    replaced: set[uuid.UUID],
) -> None:
    settings: Settings = resources.settings
    assert resources.has_embedder
    repo = LifecycleRepository(session)
    ids = [uuid_of(obj.get("id")) for _, obj in chunk]
    present = await repo.existing_ids(caller.org_id, [i for i in ids if i is not None])
    wanted: list[tuple[dict[str, Any], uuid.UUID, RememberRequest]] = []
    for (number, obj), mid in zip(chunk, ids, strict=True):
        if mid is None:
            raise InvalidInput("file", f"line {number}: a memory without an id")
        if mid in present:
            summary.existing += 1
            continue
        try:
            wanted.append((obj, mid, memory_request(obj)))
        except (ValidationError, CtxpackError):
            summary.rejected["invalid"] += 1
    # The text work off the event loop, a chunk's lines in shards (domain/writes/text_workers.py).
    items = await resources.text_workers.prepare_each(
        [req for _, _, req in wanted], caller, settings
    )
    prepared: list[tuple[dict[str, Any], uuid.UUID, WriteItem]] = []
    for (obj, mid, _), item in zip(wanted, items, strict=True):
        if item is None:
            summary.rejected["invalid"] += 1
            continue
        summary.redactions += sum(item.redactions.values())  # a rejected one's too, as a batch's
        if item.rejection is not None:
            for reason in item.rejection:
                summary.rejected[reason.code] += 1
            continue
        item.index = len(prepared)
        prepared.append((obj, mid, item))
    planned = await _plan(session, caller, prepared, replaced, summary)
    vectors: dict[uuid.UUID, Any] = {}
    to_embed = []
    for obj, mid, item, plan in planned:
        vec = obj.get("embedding")
        if keep_vectors and isinstance(vec, list) and not item.redactions:
            vectors[mid] = vec
        else:
            to_embed.append((mid, plan))
    if to_embed:
        embedded = await resources.embedder.embed_documents(
            [plan.embed_text or "" for _, plan in to_embed]
        )
        for (mid, _), vec in zip(to_embed, embedded, strict=True):
            vectors[mid] = vec
        summary.reembedded += len(to_embed)
    rows = [{**plan.values, "embedding": vectors[mid]} for _, mid, _, plan in planned]
    inserted = await repo.insert_memories(rows)
    summary.created += len(inserted)
    summary.stored.extend(mid for _, mid, _, _ in planned if mid in inserted)
    summary.duplicate += len(rows) - len(inserted)
    await MemoryRepository(session).ensure_projects(
        caller.org_id, {r["project"] for r in rows if r["project"] and r["id"] in inserted}
    )


async def _plan(
    session: Any,
    caller: Caller,
    prepared: list[tuple[dict[str, Any], uuid.UUID, WriteItem]],
    replaced: set[uuid.UUID],
    summary: ImportSummary,
) -> list[tuple[dict[str, Any], uuid.UUID, WriteItem, WritePlan]]:
    """Plan each prepared memory (``writes.plan.plan_import``), given the current holder of
    its key in the org (idempotence by key, module docstring): the inserts, with the file's
    ids and times; a duplicate or a conflict is counted (a sample of conflicts listed)."""
    wanted = [
        (item.request.namespace, key)
        for obj, _, item in prepared
        if (key := key_of(obj)) and not obj.get("superseded_by")
    ]
    holders = await MemoryRepository(session).current_by_keys(caller.org_id, wanted) if wanted else {}
    planned = []
    for obj, mid, item in prepared:
        key = key_of(obj)
        holder = holders.get((item.request.namespace, key or "")) if key and not obj.get("superseded_by") else None
        times = {
            "created_at": time_of(obj.get("created_at")) or datetime.now(UTC),
            "updated_at": time_of(obj.get("updated_at")) or datetime.now(UTC),
            "expires_at": time_of(obj.get("expires_at")),
        }
        plan = plan_import(caller.org_id, item, mid, holder, replaced, stored_hash(obj, item), times)
        if plan.action == "duplicate":
            summary.duplicate += 1
        elif plan.action == "conflict":
            summary.conflict += 1
            if len(summary.conflicts) < CONFLICT_SAMPLE:
                summary.conflicts.append(
                    {"namespace": item.request.namespace, "key": str(key), "id": str(mid),
                     "current_id": str(plan.existing_id)}
                )
        else:
            planned.append((obj, mid, item, plan))
    return planned


async def _import_links(
    session: AsyncSession, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    repo = LifecycleRepository(session)
    edges = []
    pairs = []
    for _, obj in chunk:
        source = uuid_of(obj.get("id"))
        for rel in obj.get("relations") or []:
            target = uuid_of(rel.get("target_id"))
            if source is None or target is None or not rel.get("relationship"):
                continue
            edges.append(
                {
                    "id": uuid_of(rel.get("id")) or uuid.uuid4(),
                    "source_id": source,
                    "target_id": target,
                    "relationship": str(rel["relationship"])[:64],
                    "created_at": time_of(rel.get("created_at")) or datetime.now(UTC),
                }
            )
        newer = uuid_of(obj.get("superseded_by"))
        if source is not None and newer is not None:
            pairs.append((source, newer))
    summary.relations += await repo.insert_relations(caller.org_id, edges)
    await repo.set_superseded(caller.org_id, pairs)


async def _import_keys(
    session: AsyncSession, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    """The keys, once every supersession is in (module docstring)."""
    keys = [
        (mid, key) for _, obj in chunk if (key := key_of(obj)) and (mid := uuid_of(obj.get("id"))) is not None
    ]
    summary.keys += await LifecycleRepository(session).set_keys(caller.org_id, keys)


async def _import_artifacts(
    session: AsyncSession, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    redacted = [artifact_row(caller.org_id, number, obj) for number, obj in chunk]
    inserted = await LifecycleRepository(session).insert_artifacts([row for row, _ in redacted])
    summary.artifacts += len(inserted)
    summary.redactions += sum(n for row, n in redacted if row["id"] in inserted)


async def import_store(
    resources: LocalResources,
    path: Path,
    *,
    org: str,
    reembed: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``org`` (created if missing), by the rules above, through
    the call runner in one unit of work (transport ``cli``): a failed import writes nothing
    but the runner's failure row; a rerun skips what is in (ids already in are skipped).

    Raises:
        InvalidInput: not a ctxpack export, another format version, a malformed line (found
            before anything is written).
        PayloadTooLarge: a line over ``max_scanned_bytes`` (found before anything is written).
    """
    settings = resources.settings
    async with resources.runner.operator_session() as session:
        org_row = await KeyRepository(session).org_by_name(org)
    checked: CheckedFile | None = None
    if org_row is None:
        # A file refused must not create the org; with no org there is no trail to audit the
        # refusal in, so a new org's file is checked first, outside the runner.
        checked = check_import(settings, path, reembed=reembed)
        async with resources.runner.operator_session() as session:
            org_row = await KeyRepository(session).get_or_create_org(org)
    op = operations.IMPORT

    async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ImportSummary:
        file = checked or check_import(settings, path, reembed=reembed)
        ctx.request = {"file_version": file.header.get("version"), "model": file.header.get("model"),
                       "kept_vectors": file.keep_vectors}
        summary = await _import(resources, session, caller, path, file, progress)
        await record(
            session, ctx, outcome="ok", status_code=200, memory_ids=summary.stored,
            details=summary.as_dict(), redaction_count=summary.redactions,
            rejection_count=sum(summary.rejected.values()),
        )
        return summary

    # Through the call runner, as every face: one unit of work, the audit row on success, and
    # the runner's (transport ``cli``) when the import fails.
    return await resources.runner.run(operator(org_row.org_id), op.action, run, transport=Transport.CLI)


async def _import(
    resources: LocalResources,
    session: AsyncSession,
    caller: Caller,
    path: Path,
    file: CheckedFile,
    progress: Progress | None,
) -> ImportSummary:
    """The passes over a checked file (module docstring), in the caller's unit of work."""
    summary = ImportSummary()
    if progress is not None:
        progress.set_total(file.header.get("memories"))
    for chunk in chunks(path, "memory", IMPORT_CHUNK):
        await _import_memories(resources, session, caller, chunk, file.keep_vectors, summary, file.replaced)
        if progress is not None:
            progress.update(len(chunk))
    for chunk in chunks(path, "memory", IMPORT_CHUNK * 4):
        await _import_links(session, caller, chunk, summary)
    for chunk in chunks(path, "memory", IMPORT_CHUNK * 4):
        await _import_keys(session, caller, chunk, summary)
    for chunk in chunks(path, "artifact", IMPORT_CHUNK):
        await _import_artifacts(session, caller, chunk, summary)
    summary.complete = any(obj.get("kind") == "end" for _, obj in records(path))
    return summary
