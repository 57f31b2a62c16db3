"""Reading, changing and erasing single memories, and listing them."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.facets import facet_of
from service.domain.namespaces import parse_namespace_filter
from service.domain.redaction import Redactor, merge_counts
from service.domain.remember import (
    check_metadata,
    content_hash,
    derive_name,
    document_text,
    gate_config,
)
from service.domain.write_gate import WriteGate
from service.embedding import AsyncEmbedder
from service.errors import Conflict, GateRejected, InvalidInput, NotFound
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    RelatedOut,
)
from service.store.memories import MemoryRepository
from service.store.models import Memory

_REDACTOR = Redactor()
MAX_PAGE = 200


def to_out(row: Memory, related: list[RelatedOut] | None = None) -> MemoryOut:
    return MemoryOut(
        id=row.id,
        namespace=row.namespace,
        type=row.type,
        facet=facet_of(row.type),
        name=row.name,
        content=row.content,
        project=row.project,
        domain=row.domain,
        agent_id=row.agent_id,
        tags=list(row.tags or []),
        source=row.source,
        origin=row.origin,
        url=row.url,
        valid_at=row.valid_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        superseded_by=row.superseded_by,
        metadata=dict(row.meta or {}),
        related=related or [],
        key=row.key,
    )


async def _load(session: AsyncSession, caller: Caller, memory_id: uuid.UUID, *, for_update: bool = False) -> Memory:
    row = await MemoryRepository(session).get(
        caller.org_id, memory_id, caller.namespace_prefixes, caller.projects, for_update=for_update
    )
    if row is None:
        # Same answer for "does not exist" and "exists elsewhere": nothing leaks.
        raise NotFound(f"memory {memory_id} not found")
    return row


async def get_memory(
    session: AsyncSession, caller: Caller, memory_id: uuid.UUID, ctx: AuditContext
) -> MemoryOut:
    """One memory with its one-hop relations, within the key's reach."""
    caller.require("read")
    row = await _load(session, caller, memory_id)
    ctx.namespace = row.namespace
    ctx.request = {"id": str(memory_id)}
    related = await MemoryRepository(session).related(
        caller.org_id, memory_id, caller.namespace_prefixes, caller.projects
    )
    await audit_service.record(session, ctx, outcome="ok", status_code=200, memory_ids=[memory_id])
    return to_out(
        row,
        [RelatedOut(id=i, type=t, name=n, relationship=r, direction=d) for i, t, n, r, d in related],  # type: ignore[arg-type]
    )


async def list_memories(
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    *,
    namespace: str | None,
    type_: str | None,
    project: str | None,
    agent_id: str | None,
    tag: str | None,
    offset: int,
    limit: int,
    key: str | None = None,
) -> MemoryPage:
    """Memories within the key's reach, newest first, filtered and paged.

    ``namespace``: ``u:s`` for exactly that namespace, ``u:s:*`` for the subtree, ``*`` or
    None for everything the key may see. ``key``: the current memory written under that key
    (keys are unique per namespace, so it needs an exact namespace)."""
    caller.require("read")
    ns, subtree = (None, True) if namespace is None else parse_namespace_filter(namespace)
    if ns is not None and not subtree:
        caller.check_namespace(ns)
    caller.check_project(project)
    if key is not None and (ns is None or subtree):
        raise InvalidInput("namespace", "a key is unique within one namespace: give it exactly")
    if not 0 <= offset <= 1_000_000:
        raise InvalidInput("offset", "offset must be between 0 and 1000000")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"limit must be between 1 and {MAX_PAGE}")
    ctx.namespace = ns
    ctx.request = {
        "namespace": namespace, "type": type_, "project": project, "agent_id": agent_id,
        "tag": tag, "offset": offset, "limit": limit, "key": key,
    }
    rows, total = await MemoryRepository(session).list(
        caller.org_id,
        prefixes=caller.namespace_prefixes,
        key_projects=caller.projects,
        namespace=ns,
        subtree=subtree,
        type_=type_,
        project=project,
        agent_id=agent_id,
        tag=tag,
        key=key,
        offset=offset,
        limit=limit,
    )
    await audit_service.record(
        session, ctx, outcome="ok", status_code=200, memory_ids=[r.id for r in rows],
        details={"total": total},
    )
    return MemoryPage(
        items=[to_out(r) for r in rows],
        offset=offset,
        limit=limit,
        total=total,
        has_more=offset + len(rows) < total,
    )


async def update_memory(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    memory_id: uuid.UUID,
    patch: MemoryPatch,
    ctx: AuditContext,
) -> MemoryOut:
    """Change fields of a memory. New content and names are redacted and gated like a new
    write, and the memory is re-embedded."""
    caller.require("write")
    repo = MemoryRepository(session)
    row = await _load(session, caller, memory_id, for_update=True)
    ctx.namespace = row.namespace
    changes = patch.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInput("body", "nothing to change: send at least one field")
    for key in ("content", "type", "tags"):
        if key in changes and changes[key] is None:
            raise InvalidInput(key, f"{key} cannot be null")
    if "project" in changes:
        caller.check_project(changes["project"])
    values: dict[str, Any] = {}
    counts: list[dict[str, int]] = []
    for key in ("name", "url", "source"):
        if changes.get(key) is not None:
            result = _REDACTOR.redact(changes[key])
            values[key] = result.text
            counts.append(result.counts)
        elif key in changes:
            values[key] = None
    if "metadata" in changes:
        metadata = changes["metadata"] or {}
        check_metadata(metadata, settings, "metadata")
        redacted, meta_counts = _REDACTOR.redact_json(metadata)
        values["meta"] = redacted
        counts.append(meta_counts)
    for key in ("type", "project", "domain", "tags", "origin", "valid_at"):
        if key in changes:
            values[key] = changes[key]
    if "content" in changes:
        if "\x00" in changes["content"]:
            raise InvalidInput("content", "NUL characters are not allowed in text")
        result = _REDACTOR.redact(changes["content"])
        counts.append(result.counts)
        verdict = WriteGate(gate_config(settings)).check(
            result.text, type=values.get("type", row.type), name=values.get("name")
        )
        if not verdict.accepted:
            raise GateRejected([{"code": r.code, "hint": r.hint} for r in verdict.reasons])
        values["content"] = result.text
        values["content_hash"] = content_hash(result.text)
        taken = await repo.hash_taken(caller.org_id, row.namespace, values["content_hash"], memory_id)
        if taken is not None:
            raise Conflict(f"memory {taken} in this namespace already has this content", field="content", existing_id=str(taken))
    if values.get("name") is None and "name" in values:
        values["name"] = derive_name(values.get("content", row.content))
    if "content" in values or "name" in values:
        name = values.get("name", row.name)
        content = values.get("content", row.content)
        values["embedding"] = (await embedder.embed_documents([document_text(name, content)]))[0]
    redactions = merge_counts(*counts)
    ctx.request = {
        "id": str(memory_id),
        "fields": sorted(changes),
        "redactions": [{"label": k, "count": v} for k, v in sorted(redactions.items())],
        "redaction_count": sum(redactions.values()),
    }
    await repo.update(caller.org_id, memory_id, values)
    if values.get("project"):
        await repo.ensure_projects(caller.org_id, {values["project"]})
    await audit_service.record(
        session, ctx, outcome="updated", status_code=200, memory_ids=[memory_id],
        redaction_count=sum(redactions.values()),
    )
    await session.refresh(row)
    return to_out(row)


async def delete_memory(
    session: AsyncSession, caller: Caller, memory_id: uuid.UUID, ctx: AuditContext
) -> DeleteResponse:
    """Erase a memory: its content, embedding and edges are deleted (right to erasure). Only
    its id survives, as a tombstone in the audit trail."""
    caller.require("write")
    row = await _load(session, caller, memory_id, for_update=True)
    ctx.namespace = row.namespace
    ctx.request = {"id": str(memory_id)}
    await MemoryRepository(session).erase(caller.org_id, memory_id)
    # Its name may have been derived from its content: leave only the id in old rows.
    await audit_service.erase_from_trail(session, caller.org_id, memory_id, [row.name])
    audit_id = await audit_service.record(
        session, ctx, outcome="deleted", status_code=200, memory_ids=[memory_id],
        details={"tombstone": True},
    )
    return DeleteResponse(id=memory_id, deleted=True, audit_id=audit_id)
