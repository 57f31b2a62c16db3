"""``ctxpack export`` and ``ctxpack import``: a store as versioned JSON lines, and back.

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

Import rules:

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
  a non-finite number, a vector of the wrong size. The whole file is checked first
  (``check_file``): a bad line anywhere writes nothing.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from service.config import Settings
from service.domain.artifacts import compact_size, memory_hash, schema_keys
from service.domain.auth import Caller
from service.domain.namespaces import parse_namespace
from service.domain.redaction import REDACTOR as _REDACTOR
from service.domain.redaction.fields import check_identifiers
from service.domain.writes.plan import WritePlan, plan_import
from service.domain.writes.prepare import WriteItem, prepare
from service.errors import CtxpackError, InvalidInput
from service.lifecycle.local import LocalResources, model_id, operator
from service.lifecycle.progress import Progress
from service.schemas.artifacts import SLUG
from service.schemas.common import non_finite_path
from service.schemas.memories import RememberRequest, storable_time
from service.store.audit import AuditRepository
from service.store.keys import KeyRepository
from service.store.lifecycle import LifecycleRepository
from service.store.memories import MemoryRepository

FORMAT = "ctxpack-export"
VERSION = 1
IMPORT_CHUNK = 256
_DROP = {"org_id", "tsv"}


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "tolist"):  # a pgvector / numpy vector
        return value.tolist()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":")) + "\n"


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

    settings = resources.settings
    summary = ExportSummary()
    async with resources.runner.operator_session() as session:
        org_row = await resolve_org(session, org)
        repo = LifecycleRepository(session)
        total = await repo.count_memories(org_row.org_id, namespace=namespace, since=since)
        if progress is not None:
            progress.set_total(total)
        out.write(
            _line(
                {
                    "kind": "header",
                    "format": FORMAT,
                    "version": VERSION,
                    "model": model_id(settings),
                    "dims": settings.embedding_dims,
                    "exported_at": datetime.now(UTC),
                    "org": org_row.name,
                    "filters": {"namespace": namespace, "since": since},
                    "with_vectors": with_vectors,
                    "memories": total,
                }
            )
        )
        rows = repo.stream_memories(
            org_row.org_id, namespace=namespace, since=since, with_vectors=with_vectors
        )
        async for row in rows:
            record = {"kind": "memory", **{k: v for k, v in row.items() if k not in _DROP}}
            out.write(_line(record))
            summary.memories += 1
            if progress is not None:
                progress.update()
        async for row in repo.stream_artifacts(org_row.org_id, namespace=namespace, since=since):
            out.write(_line({"kind": "artifact", **{k: v for k, v in row.items() if k not in _DROP}}))
            summary.artifacts += 1
    out.write(_line({"kind": "end", "memories": summary.memories, "artifacts": summary.artifacts}))
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
            "complete_file": self.complete,
        }


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInput("file", f"line {number}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise InvalidInput("file", f"line {number}: not a JSON object")
            yield number, obj


def read_header(path: Path) -> dict[str, Any]:
    for _, obj in _records(path):
        if obj.get("kind") != "header" or obj.get("format") != FORMAT:
            raise InvalidInput("file", "not a ctxpack export: the first line is no ctxpack header")
        if obj.get("version") != VERSION:
            raise InvalidInput("file", f"export format version {obj.get('version')}; this ctxpack reads {VERSION}")
        return obj
    raise InvalidInput("file", "empty file")


def _chunks(path: Path, kind: str, size: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    chunk: list[tuple[int, dict[str, Any]]] = []
    for number, obj in _records(path):
        if obj.get("kind") == kind:
            chunk.append((number, obj))
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _uuid(value: Any) -> uuid.UUID | None:
    return uuid.UUID(value) if isinstance(value, str) else None


def _key(obj: dict[str, Any]) -> str | None:
    key = obj.get("key")
    return key if isinstance(key, str) and key else None


def _refuse(number: int, what: str) -> InvalidInput:
    return InvalidInput("file", f"line {number}: {what}")


def _check_uuid(number: int, obj: dict[str, Any], name: str, *, required: bool = False) -> None:
    value = obj.get(name)
    if value is None and not required:
        return
    try:
        uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise _refuse(number, f"{name} is not an id") from None


def _check_time(number: int, obj: dict[str, Any], name: str) -> None:
    value = obj.get(name)
    if value is None:
        return
    try:
        storable_time(datetime.fromisoformat(value))
    except (TypeError, ValueError) as exc:
        what = str(exc) if "9999" in str(exc) else "not an ISO 8601 time"
        raise _refuse(number, f"{name} is {what}") from None


_SLUG = re.compile(SLUG)
_LABEL = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _check_slug(number: int, value: Any, name: str, pattern: re.Pattern[str]) -> None:
    """A label or project as remember takes it: the schema's pattern, and no secret."""
    if value is None:
        return
    if not isinstance(value, str) or not pattern.match(value):
        raise _refuse(number, f"{name} is not a valid label ({pattern.pattern})")
    try:
        check_identifiers({name: value})
    except InvalidInput as exc:
        raise _refuse(number, exc.message) from None


def _check_vector(number: int, obj: dict[str, Any], dims: int | None) -> None:
    vec = obj.get("embedding")
    if vec is None:
        return
    if (
        not isinstance(vec, list)
        or (dims is not None and len(vec) != dims)
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vec)
        or non_finite_path(vec) is not None
    ):
        raise _refuse(number, f"embedding is not a list of {dims or 'the header'}'s finite numbers")


def _check_line(number: int, obj: dict[str, Any], dims: int | None = None) -> None:
    """Refuse, naming the line, what import could not read back as it is, or what remember
    would refuse."""
    kind = obj.get("kind")
    if kind == "memory":
        _check_uuid(number, obj, "id", required=True)
        _check_uuid(number, obj, "superseded_by")
        for name in ("created_at", "updated_at", "expires_at", "valid_at"):
            _check_time(number, obj, name)
        _check_vector(number, obj, dims)
        where = non_finite_path(obj.get("metadata"))
        if where is not None:
            raise _refuse(number, f"metadata holds a non-finite number at {where!r}")
        relations = obj.get("relations") or []
        if not isinstance(relations, list) or not all(isinstance(r, dict) for r in relations):
            raise _refuse(number, "relations is not a list of objects")
        for rel in relations:
            _check_uuid(number, rel, "id")
            _check_uuid(number, rel, "target_id")
            _check_time(number, rel, "created_at")
            _check_slug(number, rel.get("relationship"), "relationship", _LABEL)
    elif kind == "artifact":
        _check_uuid(number, obj, "id", required=True)
        _check_uuid(number, obj, "memory_id")
        _check_time(number, obj, "created_at")
        _check_slug(number, obj.get("project"), "project", _SLUG)
        body = obj.get("body")
        if not isinstance(body, dict | list):
            raise _refuse(number, "an artifact's body is not a JSON object or list")
        where = non_finite_path(body)
        if where is not None:
            raise _refuse(number, f"body holds a non-finite number at {where!r}")
        namespace = obj.get("namespace")
        if not isinstance(namespace, str):
            raise _refuse(number, "an artifact without a namespace")
        try:
            parse_namespace(namespace)
        except InvalidInput as exc:
            raise _refuse(number, exc.message) from None
        for name, most in (("name", 300), ("summary", 2000)):
            value = obj.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > most):
                raise _refuse(number, f"an artifact's {name} is not text of at most {most} characters")
        if not isinstance(obj.get("size_bytes") or 0, int):
            raise _refuse(number, "size_bytes is not a whole number")
        keys = obj.get("schema_keys") or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise _refuse(number, "schema_keys is not a list of strings")


def check_file(path: Path, dims: int | None = None) -> set[uuid.UUID]:
    """Read the whole file once before anything is written: a line import could not read
    is refused (``InvalidInput``, field ``file``, naming the line), so bad input writes
    nothing. Returns the ids of the keyed memories the file holds as superseded (history): a
    current holder of a key with one of these ids is the file's own older version, not a
    conflict."""
    replaced: set[uuid.UUID] = set()
    for number, obj in _records(path):
        _check_line(number, obj, dims)
        if obj.get("kind") == "memory" and _key(obj) and obj.get("superseded_by"):
            replaced.add(uuid.UUID(obj["id"]))
    return replaced


async def _import_memories(
    resources: LocalResources,
    caller: Caller,
    chunk: list[tuple[int, dict[str, Any]]],
    keep_vectors: bool,
    summary: ImportSummary,
    replaced: set[uuid.UUID] | None = None,
) -> None:
    settings: Settings = resources.settings
    assert resources.has_embedder
    async with resources.runner.operator_session() as session:
        repo = LifecycleRepository(session)
        ids = [_uuid(obj.get("id")) for _, obj in chunk]
        present = await repo.existing_ids(caller.org_id, [i for i in ids if i is not None])
        prepared: list[tuple[dict[str, Any], uuid.UUID, WriteItem]] = []
        for (number, obj), mid in zip(chunk, ids, strict=True):
            if mid is None:
                raise InvalidInput("file", f"line {number}: a memory without an id")
            if mid in present:
                summary.existing += 1
                continue
            try:
                req = RememberRequest(
                    content=obj.get("content", ""),
                    namespace=obj.get("namespace", ""),
                    name=obj.get("name"),
                    type=obj.get("type", "episode"),
                    project=obj.get("project"),
                    domain=obj.get("domain"),
                    agent_id=obj.get("agent_id"),
                    tags=obj.get("tags") or [],
                    source=obj.get("source"),
                    origin=obj.get("origin"),
                    url=obj.get("url"),
                    valid_at=obj.get("valid_at"),
                    metadata=obj.get("metadata") or {},
                    key=_key(obj),
                )
                item = prepare(len(prepared), req, caller, settings, resources.pipeline, "")
            except (ValidationError, CtxpackError):
                summary.rejected["invalid"] += 1
                continue
            if item.rejection is not None:
                for reason in item.rejection:
                    summary.rejected[reason.code] += 1
                continue
            prepared.append((obj, mid, item))
        planned = await _plan(session, caller, prepared, replaced or set(), summary)
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
        summary.duplicate += len(rows) - len(inserted)
        await MemoryRepository(session).ensure_projects(
            caller.org_id, {r["project"] for r in rows if r["project"] and r["id"] in inserted}
        )


def _stored_hash(obj: dict[str, Any], item: WriteItem) -> str:
    """The hash the service derives, never the file's (a forged one would make a later,
    different remember a "duplicate" of this memory): an artifact's memory hashes its
    artifact's id, any other memory its redacted content."""
    artifact_id = item.metadata.get("artifact_id") if item.request.type == "artifact" else None
    if isinstance(artifact_id, str):
        try:
            return memory_hash(uuid.UUID(artifact_id))
        except ValueError:
            pass
    return str(item.hash)


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
        if (key := _key(obj)) and not obj.get("superseded_by")
    ]
    holders = await MemoryRepository(session).current_by_keys(caller.org_id, wanted) if wanted else {}
    planned = []
    for obj, mid, item in prepared:
        key = _key(obj)
        holder = holders.get((item.request.namespace, key or "")) if key and not obj.get("superseded_by") else None
        times = {
            "created_at": _time(obj.get("created_at")) or datetime.now(UTC),
            "updated_at": _time(obj.get("updated_at")) or datetime.now(UTC),
            "expires_at": _time(obj.get("expires_at")),
        }
        plan = plan_import(caller.org_id, item, mid, holder, replaced, _stored_hash(obj, item), times)
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
    resources: LocalResources, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    async with resources.runner.operator_session() as session:
        repo = LifecycleRepository(session)
        edges = []
        pairs = []
        for _, obj in chunk:
            source = _uuid(obj.get("id"))
            for rel in obj.get("relations") or []:
                target = _uuid(rel.get("target_id"))
                if source is None or target is None or not rel.get("relationship"):
                    continue
                edges.append(
                    {
                        "id": _uuid(rel.get("id")) or uuid.uuid4(),
                        "source_id": source,
                        "target_id": target,
                        "relationship": str(rel["relationship"])[:64],
                        "created_at": _time(rel.get("created_at")) or datetime.now(UTC),
                    }
                )
            newer = _uuid(obj.get("superseded_by"))
            if source is not None and newer is not None:
                pairs.append((source, newer))
        summary.relations += await repo.insert_relations(caller.org_id, edges)
        await repo.set_superseded(caller.org_id, pairs)


async def _import_keys(
    resources: LocalResources, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    """The keys, once every supersession is in (module docstring)."""
    keys = [
        (mid, key) for _, obj in chunk if (key := _key(obj)) and (mid := _uuid(obj.get("id"))) is not None
    ]
    async with resources.runner.operator_session() as session:
        summary.keys += await LifecycleRepository(session).set_keys(caller.org_id, keys)


async def _import_artifacts(
    resources: LocalResources, caller: Caller, chunk: list[tuple[int, dict[str, Any]]], summary: ImportSummary
) -> None:
    rows = []
    for number, obj in chunk:
        aid = _uuid(obj.get("id"))
        if aid is None or not isinstance(obj.get("namespace"), str):
            raise InvalidInput("file", f"line {number}: an artifact without id or namespace")
        body, _ = _REDACTOR.redact_json(obj.get("body"))
        body = body if isinstance(body, dict | list) else {}
        rows.append(
            {
                "org_id": caller.org_id,
                "id": aid,
                "namespace": obj["namespace"],
                "name": _REDACTOR.redact(str(obj.get("name") or "")).text,
                "summary": _REDACTOR.redact(str(obj.get("summary") or "")).text,
                "body": body,
                # Derived from the redacted body, as store_artifact derives them.
                "size_bytes": compact_size(body),
                "schema_keys": schema_keys(body),
                "project": obj.get("project"),
                "memory_id": _uuid(obj.get("memory_id")),
                "created_at": _time(obj.get("created_at")) or datetime.now(UTC),
            }
        )
    async with resources.runner.operator_session() as session:
        summary.artifacts += await LifecycleRepository(session).insert_artifacts(rows)


async def import_store(
    resources: LocalResources,
    path: Path,
    *,
    org: str,
    reembed: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``org`` (created if missing), by the rules above. Each
    chunk of memories commits on its own: an interrupted import is resumed by running it
    again (ids already in are skipped).

    Raises:
        InvalidInput: not a ctxpack export, another format version, a malformed line (found
            before anything is written).
    """
    settings = resources.settings
    header = read_header(path)
    keep_vectors = (
        not reembed
        and header.get("model") == model_id(settings)
        and header.get("dims") == settings.embedding_dims
    )
    replaced = check_file(path, header.get("dims") if keep_vectors else None)
    async with resources.runner.operator_session() as session:
        org_row = await KeyRepository(session).get_or_create_org(org)
    caller = operator(org_row.org_id)
    summary = ImportSummary()
    if progress is not None:
        progress.set_total(header.get("memories"))
    for chunk in _chunks(path, "memory", IMPORT_CHUNK):
        await _import_memories(resources, caller, chunk, keep_vectors, summary, replaced)
        if progress is not None:
            progress.update(len(chunk))
    for chunk in _chunks(path, "memory", IMPORT_CHUNK * 4):
        await _import_links(resources, caller, chunk, summary)
    for chunk in _chunks(path, "memory", IMPORT_CHUNK * 4):
        await _import_keys(resources, caller, chunk, summary)
    for chunk in _chunks(path, "artifact", IMPORT_CHUNK):
        await _import_artifacts(resources, caller, chunk, summary)
    summary.complete = any(obj.get("kind") == "end" for _, obj in _records(path))
    async with resources.runner.operator_session() as session:
        await AuditRepository(session).add(
            org_id=caller.org_id,
            key_id=caller.key_id,
            caller=caller.key_name,
            action="import",
            request={"file_version": header.get("version"), "model": header.get("model"),
                     "kept_vectors": keep_vectors},
            outcome="ok",
            status_code=200,
            details=summary.as_dict(),
            latency_ms=0.0,
        )
    return summary
