"""remember: the gated, redacting, deduplicating write path.

For every item, in this order and in the caller's single transaction:

1. validate (schema, namespace, project and namespace rights, metadata bounds, related ids,
   content size: an oversize item is refused before any text work);
2. redact secrets and PII from every stored field (content, name, url, source, domain,
   origin, tags, metadata keys and values; see domain/redaction/fields.py); identifiers
   (project, agent_id, relationship labels) holding a secret are refused with a 422;
3. the write gate (fragments, logs, dumps, reasoning chains, oversize);
4. deduplicate: exact (same normalized content) and near (cosine), both only among what a
   reader of the new memory could read: its namespace, its project or none, its agent diary
   or none (``store.memories``, "duplicate reach"). A write never learns the id or name of
   a memory outside that reach, and the same text in two projects is stored twice;
   an item with a ``key`` follows the keyed-write rules instead (domain/writes/keyed.py:
   created, updated with the superseded id, or duplicate; its copies looked for within the
   same duplicate reach);
5. embed name + content (one model call for the whole batch), store, link, audit.

Project rights: a key limited to projects writes only into them (``Caller.may_write_project``):
it cannot create shared (project-less) memories, nor supersede one (``supersedes`` must be
within its write reach; ``related`` needs only read reach).

Re-assertion: remembering the text of a superseded memory is not a duplicate of that
history. A new memory is stored and, when the request names no ``supersedes``, it supersedes
the current end of the old memory's chain (if the key may write it), so the re-asserted fact
is current again and the one that had replaced it is not shown beside it.

A key is a name, not content: it is never redacted, so a key the redactor would change (it
looks like a secret or personal data) is refused (422, field ``key``).

Nothing unredacted reaches the embedder, the database, the logs or the audit row. Steps 1-3
are CPU work on text: they run in a worker thread, never on the event loop (a large batch's
also in the text worker processes, domain/writes/text_workers.py).
"""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncSession

from service import metrics
from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.facets import facet_of
from service.domain.namespaces import parse_namespace
from service.domain.scan_bound import check_scan_bound
from service.domain.write_pipeline import WritePipeline
from service.domain.write_pipeline import content_hash as content_hash
from service.domain.writes.apply import store_items
from service.domain.writes.prepare import (
    WriteItem,
    check_batch_keys,
    derive_name,
    document_text,
    prepare,
    request_summary,
    scanned_parts,
    validate_links,
)
from service.domain.writes.text_workers import TextWorkers, item_prefix
from service.embedding import AsyncEmbedder
from service.errors import GateRejected, InvalidInput
from service.schemas.memories import (
    BatchItemResult,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
)
from service.store.memories import MemoryRepository

__all__ = ["content_hash", "derive_name", "document_text", "remember", "remember_batch"]


def _count(items: list[WriteItem], statuses: dict[str, int]) -> None:
    """Report a finished call to the metrics: redactions, gate reasons, outcomes."""
    for item in items:
        metrics.count_redactions(item.redactions)
        if item.rejection is not None:
            metrics.count_gate_rejections(r.code for r in item.rejection)
    for status, n in statuses.items():
        metrics.count_writes(status, n)


async def remember(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    req: RememberRequest,
    ctx: AuditContext,
) -> RememberResponse:
    """Store one memory (or find its exact duplicate).

    Raises:
        GateRejected: the write gate refused it (422 with reason codes and hints).
        InvalidInput: bad metadata, unknown related/supersedes id (422 naming the field).
        PermissionDenied: namespace or project outside the key's reach (403).
    """
    caller.require("write")
    ctx.namespace = parse_namespace(req.namespace)
    item = await asyncio.to_thread(
        prepare, 0, req, caller, settings, WritePipeline.for_settings(settings), ""
    )
    ctx.request = request_summary([item])
    if item.rejection is not None:
        _count([item], {"rejected": 1})
        raise GateRejected([r.model_dump() for r in item.rejection])
    await validate_links(MemoryRepository(session), caller, [item], None)
    status, memory_id, dups, superseded = (await store_items(session, embedder, settings, caller, [item]))[0]
    if dups:
        item.warnings.append(f"{len(dups)} near duplicate(s) in this namespace; consider supersedes")
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome=status,
        status_code=201,
        memory_ids=[memory_id],
        details={
            "status": status,
            "gate": [r.code for r in item.verdict.reasons] if item.verdict else [],
            "near_duplicates": [{"id": str(d.id), "score": d.score} for d in dups],
            "superseded_id": str(superseded) if superseded else None,
        },
        redaction_count=sum(item.redactions.values()),
    )
    _count([item], {status: 1})
    return RememberResponse(
        id=memory_id,
        status=status,
        namespace=req.namespace,
        type=req.type,
        facet=facet_of(req.type),
        name=item.name,
        redactions=item.redaction_list,
        near_duplicates=dups,
        warnings=item.warnings,
        audit_id=audit_id,
        expires_at=item.expires_at,
        key=req.key,
        superseded_id=superseded,
    )


async def remember_batch(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    req: RememberBatchRequest,
    ctx: AuditContext,
    workers: TextWorkers,
) -> RememberBatchResponse:
    """Store up to ``max_batch_items`` memories with one model call. A gate rejection or a
    duplicate is an outcome of that item only; invalid input (422) or a namespace/project
    outside the key's reach (403) refuses the whole batch, naming the item, and stores
    nothing. Steps 1-3 of a large batch run in shards on ``workers`` (text_workers.py)."""
    caller.require("write")
    if len(req.items) > settings.max_batch_items:
        raise InvalidInput("items", f"{len(req.items)} items; at most {settings.max_batch_items} per batch")

    def check_bound() -> None:
        check_scan_bound(
            [p for n, r in enumerate(req.items) for p in scanned_parts(r, item_prefix(n))],
            settings.max_scanned_bytes,
            "split the batch",
        )

    await asyncio.to_thread(check_bound)
    items = await workers.prepare_batch(req.items, caller, settings)
    check_batch_keys(items)
    written_in = {i.request.namespace for i in items}
    ctx.namespace = next(iter(written_in)) if len(written_in) == 1 else None
    ctx.request = request_summary(items)
    await validate_links(MemoryRepository(session), caller, [i for i in items if i.rejection is None], "items.")
    stored = await store_items(session, embedder, settings, caller, items)

    results: list[BatchItemResult] = []
    for item in items:
        if item.rejection is not None:
            results.append(
                BatchItemResult(
                    index=item.index, status="rejected", reasons=item.rejection, redactions=item.redaction_list
                )
            )
            continue
        status, memory_id, dups, superseded = stored[item.index]
        results.append(
            BatchItemResult(
                index=item.index,
                status=status,
                id=memory_id,
                superseded_id=superseded,
                redactions=item.redaction_list,
                near_duplicates=dups,
                expires_at=item.expires_at,
            )
        )
    counts = {
        s: sum(1 for r in results if r.status == s)
        for s in ("created", "updated", "duplicate", "rejected")
    }
    reasons: dict[str, int] = {}
    for r in results:
        for reason in r.reasons or []:
            reasons[reason.code] = reasons.get(reason.code, 0) + 1
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="ok" if counts["rejected"] == 0 else "partial",
        status_code=200,
        memory_ids=list(dict.fromkeys(r.id for r in results if r.id is not None)),
        details={
            # "updated" only when keyed items replaced something: the shape stays as it was.
            "counts": {k: v for k, v in counts.items() if k != "updated" or v},
            "rejections_by_reason": reasons,
            "items": [
                {"index": r.index, "status": r.status, "id": str(r.id) if r.id else None,
                 "reasons": [x.code for x in r.reasons or []]}
                for r in results
            ],
        },
        redaction_count=sum(sum(i.redactions.values()) for i in items),
        rejection_count=counts["rejected"],
    )
    _count(items, counts)
    return RememberBatchResponse(
        items=results,
        created=counts["created"],
        updated=counts["updated"],
        duplicates=counts["duplicate"],
        rejected=counts["rejected"],
        audit_id=audit_id,
    )
