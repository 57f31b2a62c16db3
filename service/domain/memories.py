"""Reading, changing and erasing single memories, and listing them.

Write reach. Reading a memory takes read reach (org, namespace prefixes, the key's projects
or none). Changing or erasing it takes write reach too: a key limited to projects changes
only memories of its projects, never a shared (project-less) one, and moves a memory only
into its projects (``Caller.may_write_project``; 403 ``project_access_denied``, while a
memory out of read reach stays 404).

PATCH outcomes match remember's: content is redacted, then gated with the redacted secrets
taken out (a memory that was only a secret is a fragment); a type change is gated against
the content it will label; tags follow the same limits. A name follows the content: a
content change re-derives a name that had been derived from the old content, keeps one that
was given explicitly, and both are redacted. A content or project change may not collide
with another current memory holding the same content key (409, naming it: it lies in the
same namespace, project and diary, so within the caller's reach).

Erasure erases: the row (content, embedding, edges), an artifact memory's artifact body,
and every name the memory had wherever the audit trail holds it (current and former, since
a remember row records the name it derived). Only ids and counts remain. Supersession is
kept a history (``MemoryRepository.erase``).
"""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.expiry import purge_colliding
from service.domain.facets import facet_of
from service.domain.namespaces import parse_namespace_filter
from service.domain.redaction import REDACTOR
from service.domain.redaction.fields import check_identifiers
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.apply import apply_update
from service.domain.writes.plan import plan_update, taken_key, update_values
from service.domain.writes.prepare import derive_name, prepare_update
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput, NotFound
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    RelatedOut,
)
from service.store.audit import AuditRepository
from service.store.memories import MemoryRepository
from service.store.models import Memory

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
        expires_at=row.expires_at,
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
        [RelatedOut(id=i, type=t, name=n, relationship=r, direction=d) for i, t, n, r, d in related],
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
    text_query: str | None = None,
    key: str | None = None,
) -> MemoryPage:
    """Memories within the key's reach, newest first, filtered and paged.

    ``namespace``: ``u:s`` for exactly that namespace, ``u:s:*`` for the subtree, ``*`` or
    None for everything the key may see. ``text_query``: full-text search over name and
    content (web-search syntax: words, "phrases", -exclusions). ``key``: the current memory
    written under that key (keys are unique per namespace, so it needs an exact namespace)."""
    caller.require("read")
    ns, subtree = (None, True) if namespace is None else parse_namespace_filter(namespace)
    if ns is not None and not subtree:
        caller.check_namespace(ns)
    # Filters are kept in the audit row: identifiers holding a secret are refused (before
    # the project check, whose 403 names the project), as on every write; a tag is matched
    # as stored, that is redacted (short: bounded by the route).
    check_identifiers({"project": project, "agent_id": agent_id, "key": key})
    caller.check_project(project)
    if tag is not None:
        tag = REDACTOR.redact(tag).text
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
    if text_query is not None:
        if "\x00" in text_query or len(text_query) > 500:
            raise InvalidInput("q", "a text query is at most 500 characters, without NUL")
        ctx.request["q_chars"] = len(text_query)
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
        text_query=text_query,
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
    write, and the memory is re-embedded (see the module docstring for the rules).

    Raises:
        NotFound: no such memory within the key's read reach.
        ProjectAccessDenied: the memory, or the project it would move to, is outside the
            key's write reach.
        GateRejected: the new content, or the old content under a new type, fails the gate.
        Conflict: another current memory already holds the resulting content key.
    """
    caller.require("write")
    repo = MemoryRepository(session)
    row = await _load(session, caller, memory_id, for_update=True)
    ctx.namespace = row.namespace
    caller.check_write_project(row.project)
    changes = patch.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInput("body", "nothing to change: send at least one field")
    for key in ("content", "type", "tags"):
        if key in changes and changes[key] is None:
            raise InvalidInput(key, f"{key} cannot be null")
    if "project" in changes:
        # An identifier holding a secret is refused before the 403 could name it.
        check_identifiers({"project": changes["project"]})
        caller.check_write_project(changes["project"])
        if changes["project"] is not None and changes["project"] != row.project:
            # The memories this one supersedes are hidden behind it: their readers must keep
            # reading it (the supersedes rule), so it may not move into another project.
            before = await repo.predecessor_projects(caller.org_id, row.id)
            if before - {changes["project"]}:
                raise InvalidInput(
                    "project",
                    "this memory supersedes one that is shared or in another project: its "
                    "readers could no longer read its replacement",
                )
    pipeline = WritePipeline.for_settings(settings)
    # The write path, as for remember: prepare (CPU work on text, in a worker thread, never
    # on the event loop) -> plan -> apply.
    item = await asyncio.to_thread(
        prepare_update, changes, row.type, row.name, row.content, pipeline
    )
    values = update_values(row, item)
    taken = None
    content_key = taken_key(row, values)
    if content_key is not None:
        # An expired copy nobody can read is purged first, as for remember: never a 409.
        await purge_colliding(session, caller.org_id, [(row.namespace, content_key[3])])
        taken = await repo.hash_taken(caller.org_id, content_key, memory_id)
    plan = plan_update(row, values, taken)
    plan.refuse()
    ctx.request = {
        "id": str(memory_id),
        "fields": sorted(changes),  # field names only, never values
        "redactions": [{"label": k, "count": v} for k, v in sorted(item.redactions.items())],
        "redaction_count": sum(item.redactions.values()),
    }
    await apply_update(repo, embedder, caller, plan)
    await audit_service.record(
        session, ctx, outcome="updated", status_code=200, memory_ids=[memory_id],
        redaction_count=sum(item.redactions.values()),
    )
    await session.refresh(row)
    return to_out(row)


async def erase_memory(session: AsyncSession, caller: Caller, row: Memory) -> None:
    """Erase ``row`` within the call's unit of work: the row, its edges, an artifact body,
    and its names (current and former) and key wherever the audit trail holds them. The caller has
    checked write reach."""
    names: list[str | None] = [row.name, derive_name(row.content), row.key]
    names += await AuditRepository(session).recorded_names(caller.org_id, row.id)
    await MemoryRepository(session).erase(caller.org_id, row)
    await audit_service.erase_from_trail(session, caller.org_id, row.id, names)


async def delete_memory(
    session: AsyncSession, caller: Caller, memory_id: uuid.UUID, ctx: AuditContext
) -> DeleteResponse:
    """Erase a memory: its content, embedding, edges, artifact body and names are deleted
    (right to erasure). Only its id survives, as a tombstone in the audit trail.

    Raises:
        NotFound: no such memory within the key's read reach.
        ProjectAccessDenied: it is outside the key's write reach (a shared memory, for a key
            limited to projects).
    """
    caller.require("write")
    row = await _load(session, caller, memory_id, for_update=True)
    ctx.namespace = row.namespace
    ctx.request = {"id": str(memory_id)}
    caller.check_write_project(row.project)
    await erase_memory(session, caller, row)
    audit_id = await audit_service.record(
        session, ctx, outcome="deleted", status_code=200, memory_ids=[memory_id],
        details={"tombstone": True},
    )
    return DeleteResponse(id=memory_id, deleted=True, audit_id=audit_id)
