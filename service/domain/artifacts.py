"""Artifacts: JSON payloads kept out of prompts (design doc section 5, "artifact
referencing"). A pack shows an artifact as its summary plus a reference; a reader then
declares the fields it needs and gets only those.

Storing an artifact writes two rows in one transaction: the body (``artifacts``) and a memory
of type ``artifact`` whose content is the summary, embedded like any memory, so packs find
it by relevance and list it under ``artifacts``. Name, summary and body (its keys as well as
its values, at any depth) are redacted first, in a worker thread, so no key of the body
reaches the derived summary, the schema keys or a pack unredacted.

Erasing either erases both: ``DELETE /v1/artifacts/{id}`` erases the body and the memory,
and deleting the memory erases the body (``MemoryRepository.erase``). Both take write reach
(a key limited to projects writes only its projects; shared artifacts are read-only to it).
A PATCH of the memory's project moves the body with it (``MemoryRepository.update``).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.memories import erase_memory
from service.domain.namespaces import parse_namespace
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.scan_bound import check_scan_bound, compact_size
from service.domain.writes.plan import plan_artifact_memory
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput, NotFound
from service.schemas.artifacts import (
    ArtifactCreate,
    ArtifactCreated,
    ArtifactDeleted,
    ArtifactFields,
)
from service.store.artifacts import ArtifactRepository
from service.store.memories import MemoryRepository

MAX_SCHEMA_KEYS = 200
MAX_FIELDS = 100
# Keys named in a derived summary, and items scanned for a list's keys.
SUMMARY_KEYS = 12
SCAN_ITEMS = 1000


def schema_keys(body: dict[str, Any] | list[Any]) -> list[str]:
    """Top-level keys in first-seen order: the object's, or those of a list's object items."""
    if isinstance(body, dict):
        return [str(k) for k in body][:MAX_SCHEMA_KEYS]
    seen: dict[str, None] = {}
    for item in body[:SCAN_ITEMS]:
        if isinstance(item, dict):
            for k in item:
                seen.setdefault(str(k), None)
                if len(seen) >= MAX_SCHEMA_KEYS:
                    return list(seen)
    return list(seen)


def derive_summary(name: str, body: dict[str, Any] | list[Any], keys: list[str], size: int) -> str:
    """A summary from the artifact's shape, when the writer gave none."""
    shown = ", ".join(keys[:SUMMARY_KEYS]) + (" ..." if len(keys) > SUMMARY_KEYS else "")
    if isinstance(body, dict):
        shape = f"JSON object with {len(keys)} key{'s' if len(keys) != 1 else ''}"
    else:
        shape = f"JSON list of {len(body)} item{'s' if len(body) != 1 else ''}"
        if keys:
            shape += ", items with keys"
    return f"{name}: {shape}{': ' + shown if shown else ''} ({size} bytes)."


def memory_hash(artifact_id: uuid.UUID) -> str:
    """The ``content_hash`` of an artifact's memory: its artifact's id, not its summary (two
    artifacts with one summary are two memories)."""
    return hashlib.sha256(f"artifact:{artifact_id}".encode()).hexdigest()


async def store_artifact(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    caller: Caller,
    ctx: AuditContext,
    req: ArtifactCreate,
    max_scanned_bytes: int,
) -> ArtifactCreated:
    """Store a JSON artifact and the memory that references it; audit the call.

    Returns:
        ``artifact_id`` (for GET /v1/artifacts/{id}?fields=...), the summary packs will
        show, the body's compact size and its top-level keys.

    Raises:
        PermissionDenied: no write scope, or namespace/project outside the key's reach.
        PayloadTooLarge: a body over ``max_scanned_bytes`` as compact JSON (413).
    """
    caller.require("write")
    ctx.namespace = parse_namespace(req.namespace)
    ctx.request = {"namespace": req.namespace, "project": req.project}
    caller.check_namespace(req.namespace)
    check_identifiers({"project": req.project})
    caller.check_write_project(req.project)

    def redact() -> tuple[dict[str, Any], dict[str, int]]:
        # Bounded before any scan (domain/scan_bound.py): the body counts as compact JSON.
        check_scan_bound(
            [("name", req.name), ("summary", req.summary), ("body", req.body)],
            max_scanned_bytes,
            "the body counts as compact JSON; store less",
        )
        return redact_fields({"name": req.name, "summary": req.summary, "body": req.body})

    values, counts = await asyncio.to_thread(redact)
    name: str = values["name"]
    body = values["body"]
    if not isinstance(body, dict | list):  # pragma: no cover - redact_json keeps the shape
        raise InvalidInput("body", "body must be a JSON object or list")
    keys = schema_keys(body)
    size = compact_size(body)
    summary: str = values["summary"] if values["summary"] is not None else derive_summary(
        name, body, keys, size
    )
    redactions = sum(counts.values())
    ctx.request.update(name=name[:200], size_bytes=size, redaction_count=redactions)

    artifact_id = uuid.uuid4()
    memory_id = uuid.uuid4()
    plan = plan_artifact_memory(
        caller.org_id,
        artifact_id=artifact_id,
        namespace=req.namespace,
        project=req.project,
        name=name,
        summary=summary,
        content_hash=memory_hash(artifact_id),
        metadata={"artifact_id": str(artifact_id), "schema_keys": keys[:50], "size_bytes": size},
    )
    [embedding] = await embedder.embed_documents([plan.embed_text or ""])
    await ArtifactRepository(session).add(
        memory={**plan.values, "id": memory_id, "embedding": embedding},
        artifact_id=artifact_id,
        body=body,
        size_bytes=size,
        schema_keys=keys,
    )
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="ok",
        status_code=201,
        memory_ids=[memory_id],
        details={
            "operation": "store",
            "artifact_id": str(artifact_id),
            "size_bytes": size,
            "schema_keys": len(keys),
            "redactions": counts,
        },
        redaction_count=redactions,
    )
    return ArtifactCreated(
        artifact_id=artifact_id,
        memory_id=memory_id,
        namespace=req.namespace,
        name=name,
        summary=summary,
        size_bytes=size,
        schema_keys=keys,
        redactions=redactions,
        audit_id=audit_id,
    )


def parse_fields(fields: str | None) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]`` (blanks dropped, order kept, duplicates removed)."""
    if fields is None:
        return None
    names = list(dict.fromkeys(f.strip() for f in fields.split(",") if f.strip()))
    if not names:
        raise InvalidInput("fields", "fields must name at least one field: fields=a,b")
    if len(names) > MAX_FIELDS:
        raise InvalidInput("fields", f"at most {MAX_FIELDS} fields per call")
    if any("\x00" in n for n in names):
        raise InvalidInput("fields", "field names must not contain NUL characters")
    return names


async def read_artifact(
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    artifact_id: uuid.UUID,
    fields: str | None,
    namespace: str | None,
) -> ArtifactFields:
    """Resolve an artifact's declared fields; audit the call.

    Args:
        fields: comma-separated field names; None returns the whole body.
        namespace: the reader's namespace; when given, the artifact must live there or in
            an ancestor (as in a pack).

    Raises:
        NotFound: no such artifact within the caller's reach (never says which).
    """
    caller.require("read")
    names = parse_fields(fields)
    # The namespace is parsed (a secret in it refused) and the field names redacted before
    # either reaches the audit row; the lookup uses the names as sent.
    visible = None
    if namespace is not None:
        visible = caller.visible_namespaces(parse_namespace(namespace))
    shown = names
    if names:
        redacted, _ = await asyncio.to_thread(redact_fields, {"fields": names})
        shown = redacted["fields"]
    ctx.namespace = namespace
    ctx.request = {"artifact_id": str(artifact_id), "fields": shown, "namespace": namespace}
    row = await ArtifactRepository(session).get(
        caller.org_id,
        artifact_id,
        namespaces=visible,
        prefixes=caller.namespace_prefixes,
        key_projects=caller.projects,
        fields=names,
    )
    if row is None:
        raise NotFound(f"Artifact not found: {artifact_id}", field="artifact_id")
    found: dict[str, Any] = dict(row["fields"] or {})
    missing = [s for n, s in zip(names or [], shown or [], strict=True) if n not in found]
    ordered = {n: found[n] for n in names or [] if n in found}
    await audit_service.record(
        session,
        ctx,
        outcome="ok",
        status_code=200,
        details={
            "operation": "read",
            "artifact_id": str(artifact_id),
            "fields_found": len(ordered),
            "fields_missing": missing[:MAX_FIELDS],
            "whole_body": names is None,
        },
    )
    return ArtifactFields(
        artifact_id=row["id"],
        namespace=row["namespace"],
        name=row["name"],
        summary=row["summary"],
        size_bytes=row["size_bytes"],
        schema_keys=list(row["schema_keys"]),
        project=row["project"],
        created_at=row["created_at"],
        fields=ordered,
        missing=missing,
        body=row["body"],
    )


async def delete_artifact(
    session: AsyncSession, caller: Caller, ctx: AuditContext, artifact_id: uuid.UUID
) -> ArtifactDeleted:
    """Erase an artifact: its body and the memory that references it (content, embedding,
    edges, names in the audit trail), as deleting that memory does; audit the call.

    Raises:
        NotFound: no such artifact within the key's read reach (never says which).
        ProjectAccessDenied: it is outside the key's write reach.
    """
    caller.require("write")
    ctx.request = {"artifact_id": str(artifact_id)}
    found = await ArtifactRepository(session).owner(
        caller.org_id, artifact_id, prefixes=caller.namespace_prefixes, key_projects=caller.projects
    )
    if found is None:
        raise NotFound(f"Artifact not found: {artifact_id}", field="artifact_id")
    memory_id, project = found
    caller.check_write_project(project)
    memory = None
    if memory_id is not None:
        memory = await MemoryRepository(session).get(
            caller.org_id, memory_id, caller.namespace_prefixes, caller.projects, for_update=True
        )
    if memory is not None:
        ctx.namespace = memory.namespace
        await erase_memory(session, caller, memory)
    await ArtifactRepository(session).delete(caller.org_id, artifact_id)
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="deleted",
        status_code=200,
        memory_ids=[memory_id] if memory_id else [],
        details={"operation": "delete", "artifact_id": str(artifact_id), "tombstone": True},
    )
    return ArtifactDeleted(
        artifact_id=artifact_id, memory_id=memory_id, deleted=True, audit_id=audit_id
    )
