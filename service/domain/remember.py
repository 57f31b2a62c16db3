"""remember: the gated, redacting, deduplicating write path.

For every item, in this order and in the caller's single transaction:

1. validate (schema, namespace, project and namespace rights, metadata bounds, related ids,
   content size: an oversize item is refused before any text work);
2. redact secrets and PII from every stored field (content, name, url, source, domain,
   origin, tags, metadata keys and values; see domain/redaction_fields.py); identifiers
   (project, agent_id, relationship labels) holding a secret are refused with a 422;
3. the write gate (fragments, logs, dumps, reasoning chains, oversize);
4. deduplicate: exact (same normalized content) and near (cosine), both only among what a
   reader of the new memory could read: its namespace, its project or none, its agent diary
   or none (``store.memories``, "duplicate reach"). A write never learns the id or name of
   a memory outside that reach, and the same text in two projects is stored twice;
   an item with a ``key`` follows the keyed-write rules instead (domain/keyed_writes.py:
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
are CPU work on text: they run in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service import metrics
from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.expiry import expiry_of, purge_colliding
from service.domain.facets import facet_of
from service.domain.keyed_writes import plan_keyed_write
from service.domain.redaction import merge_counts
from service.domain.redaction_fields import check_identifiers
from service.domain.write_gate import GateVerdict
from service.domain.write_pipeline import WritePipeline
from service.domain.write_pipeline import check_metadata as check_metadata
from service.domain.write_pipeline import content_hash as content_hash
from service.domain.write_pipeline import gate_config as gate_config
from service.domain.write_pipeline import normalize as normalize
from service.embedding import AsyncEmbedder
from service.errors import Conflict, GateRejected, InvalidInput, PayloadTooLarge
from service.schemas.memories import (
    BatchItemResult,
    GateReasonOut,
    NearDuplicate,
    Redaction,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
)
from service.store.memories import MemoryRepository

NAME_CHARS = 80
_WS = re.compile(r"\s+")


def derive_name(content: str) -> str:
    """A short title from the content: its first sentence or line, cut at a word boundary."""
    first = re.split(r"(?<=[.!?])\s|\n", content.strip(), maxsplit=1)[0].strip()
    first = _WS.sub(" ", first)
    if len(first) <= NAME_CHARS:
        return first.rstrip(".") or content.strip()[:NAME_CHARS]
    cut = first[:NAME_CHARS].rsplit(" ", 1)[0]
    return cut + "…"


def document_text(name: str, content: str) -> str:
    """What the model embeds for a memory: its name over its content, or the content alone when
    the name is a prefix of it (a derived name is the content's first sentence; embedding those
    words twice doubles the model's work on a one-sentence memory for no new meaning)."""
    head = name.rstrip("…").rstrip()
    if not head or _WS.sub(" ", content.strip()).startswith(head):
        return content
    return f"{name}\n{content}"


@dataclass
class _Prepared:
    """One item after validation, redaction and the gate."""

    index: int
    request: RememberRequest
    content: str = ""
    name: str = ""
    url: str | None = None
    source: str | None = None
    domain: str | None = None
    origin: str | None = None
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    redactions: dict[str, int] = field(default_factory=dict)
    verdict: GateVerdict | None = None
    hash: str = ""
    expires_at: datetime | None = None
    warnings: list[str] = field(default_factory=list)
    rejection: list[GateReasonOut] | None = None
    # What the new memory supersedes: the request's, or the chain head a re-assertion replaces.
    supersedes: uuid.UUID | None = None

    @property
    def content_key(self) -> tuple[str, str | None, str | None, str]:
        """The exact-duplicate key: namespace, project, agent diary, content hash."""
        req = self.request
        return (req.namespace, req.project, req.agent_id, self.hash)
    prefix: str = ""  # how a field of this item is named in an error: "" or "items.3."

    @property
    def redaction_list(self) -> list[Redaction]:
        return [Redaction(label=k, count=v) for k, v in sorted(self.redactions.items())]


def _prepare(
    index: int,
    req: RememberRequest,
    caller: Caller,
    settings: Settings,
    pipeline: WritePipeline,
    prefix: str,
) -> _Prepared:
    """Steps 1-3 for one item (the write pipeline, after the key's rights). Raises
    InvalidInput/permission errors; gate rejections are recorded on the item, not raised, so
    a batch can carry on."""
    caller.check_namespace(req.namespace)
    # Identifiers are checked before the project check, whose 403 names the project.
    check_identifiers(
        {
            f"{prefix}project": req.project,
            f"{prefix}agent_id": req.agent_id,
            **{f"{prefix}related.{n}.relationship": r.relationship for n, r in enumerate(req.related)},
        }
    )
    caller.check_write_project(req.project, f"{prefix}project")
    if req.key is not None and pipeline.redactor.redact(req.key).counts:
        raise InvalidInput(
            f"{prefix}key", "the key looks like a secret or personal data; keys are stored as sent"
        )
    clean = pipeline.run(
        type=req.type,
        content=req.content,
        name=req.name or None,
        url=req.url or None,
        source=req.source or None,
        metadata=req.metadata,
        domain=req.domain,
        origin=req.origin,
        tags=list(req.tags),
        field_prefix=prefix,
    )
    item = _Prepared(index=index, request=req, prefix=prefix)
    item.expires_at = expiry_of(req, settings, prefix)
    item.content = clean.content or ""
    item.url = clean.url
    item.source = clean.source
    item.domain = clean.domain
    item.origin = clean.origin
    item.tags = clean.tags or []
    item.metadata = clean.metadata or {}
    item.redactions = clean.redactions
    if item.redactions:
        item.warnings.append(
            f"redacted {sum(item.redactions.values())} secret(s) before storing: "
            + ", ".join(sorted(item.redactions))
        )
    item.verdict = clean.verdict
    if not clean.accepted:
        assert item.verdict is not None
        item.rejection = [GateReasonOut(code=r.code, hint=r.hint) for r in item.verdict.reasons]
        return item
    item.name = clean.name or derive_name(item.content)
    item.hash = clean.hash
    return item


async def _validate_links(
    repo: MemoryRepository, caller: Caller, items: list[_Prepared], field_prefix: str | None
) -> None:
    """422 naming the field when a related or superseded id is unknown, foreign or out of
    the key's reach (all three look the same, so nothing leaks about other orgs)."""
    wanted: set[uuid.UUID] = set()
    for item in items:
        wanted.update(r.id for r in item.request.related)
        if item.request.supersedes:
            wanted.add(item.request.supersedes)
    if not wanted:
        return
    found = await repo.link_targets(
        caller.org_id, list(wanted), caller.namespace_prefixes, caller.projects
    )
    for item in items:
        prefix = f"{field_prefix}{item.index}." if field_prefix is not None else ""
        for pos, ref in enumerate(item.request.related):
            if ref.id not in found:
                raise InvalidInput(
                    f"{prefix}related.{pos}.id", f"unknown memory id {ref.id} (not in this org or out of reach)"
                )
        if item.request.supersedes and item.request.supersedes not in found:
            raise InvalidInput(
                f"{prefix}supersedes",
                f"unknown memory id {item.request.supersedes} (not in this org or out of reach)",
            )
        if item.request.supersedes:
            # Superseding hides the old memory from every reader: it takes write reach, and
            # every reader of the old memory must be able to read the new one.
            project, namespace, agent_id = found[item.request.supersedes]
            caller.check_write_project(project, f"{prefix}supersedes")
            if not _reads_along(item.request, project, namespace, agent_id):
                raise InvalidInput(
                    f"{prefix}supersedes",
                    f"memory {item.request.supersedes} is read where this one would not be "
                    "(another namespace, another agent's diary or another project): superseding "
                    "it would hide it from readers who cannot see its replacement; write this "
                    "memory in its namespace, shared or in its project, and in its diary or none",
                )


def _reads_along(
    req: RememberRequest, project: str | None, namespace: str, agent_id: str | None
) -> bool:
    """Whether every reader of a memory at ``namespace`` (in ``project`` and ``agent_id``'s
    diary) also reads ``req``'s new memory: the new one lives at that very namespace, is
    shared or in the same project, and is in no diary or the same one. Not at an ancestor:
    a pack below reads its ancestors, but a key limited to the old namespace's prefix does
    not, and would lose the memory and meet a ``superseded_by`` it cannot read."""
    return (
        namespace == req.namespace
        and (req.project is None or req.project == project)
        and (req.agent_id is None or req.agent_id == agent_id)
    )


def _request_summary(items: list[_Prepared]) -> dict[str, Any]:
    """What the audit row keeps of the request: shapes and names, never content."""
    def one(item: _Prepared) -> dict[str, Any]:
        req = item.request
        return {
            "namespace": req.namespace,
            "type": req.type,
            "name": item.name or None,
            "project": req.project,
            "agent_id": req.agent_id,
            "content_chars": len(item.content),
            "tags": len(req.tags),
            "related": [str(r.id) for r in req.related],
            "supersedes": str(req.supersedes) if req.supersedes else None,
            "key": req.key,
        }

    total = merge_counts(*(i.redactions for i in items))
    summary: dict[str, Any] = {
        "redactions": [{"label": k, "count": v} for k, v in sorted(total.items())],
        "redaction_count": sum(total.values()),
    }
    if len(items) == 1:
        summary.update(one(items[0]))
    else:
        summary["items"] = len(items)
        summary["namespaces"] = sorted({i.request.namespace for i in items})[:20]
    return summary


def _count(items: list[_Prepared], statuses: dict[str, int]) -> None:
    """Report a finished call to the metrics: redactions, gate reasons, outcomes."""
    for item in items:
        metrics.count_redactions(item.redactions)
        if item.rejection is not None:
            metrics.count_gate_rejections(r.code for r in item.rejection)
    for status, n in statuses.items():
        metrics.count_writes(status, n)


async def _reassert(
    repo: MemoryRepository, caller: Caller, item: _Prepared, superseded: uuid.UUID
) -> None:
    """``item`` repeats the text of a superseded memory: unless the request names its own
    ``supersedes``, the new memory supersedes the current end of that memory's chain, when
    the key may write it and every reader of it can read the new memory: same namespace and
    diary, and the same project unless the new memory is shared (otherwise it is simply
    stored, and current: the end stays visible to those who cannot see the new memory)."""
    if item.request.supersedes is not None:
        return
    head = await repo.chain_head(caller.org_id, superseded)
    req = item.request
    if (
        head is not None
        and caller.may_write_project(head.project)
        and head.namespace == req.namespace
        and head.agent_id == req.agent_id
        and (req.project is None or head.project == req.project)
    ):
        item.supersedes = head.id
        item.warnings.append(
            f"this text had been superseded; stored again as current, superseding {head.id}"
        )


Outcome = tuple[str, uuid.UUID, list[NearDuplicate], uuid.UUID | None]


async def _store(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    items: list[_Prepared],
) -> dict[int, Outcome]:
    """Steps 4-5 for accepted items. Returns ``{index: (status, id, near_duplicates,
    superseded_id)}``. Items without a key first, so a keyed item can take the key onto an
    identical memory stored by the same batch.

    Every duplicate check runs within the duplicate reach (see the module docstring)."""
    accepted = [i for i in items if i.rejection is None]
    # An expired memory that is not purged yet must not make this write a "duplicate" of
    # something nobody can read any more: purge it first (audited like the expiry job).
    # Keyed writes purge theirs under their key locks (_store_keyed), key holders included.
    await purge_colliding(
        session,
        caller.org_id,
        list({(i.request.namespace, i.hash) for i in accepted if i.request.key is None}),
    )
    outcome = await _store_plain(
        session, embedder, settings, caller, [i for i in accepted if i.request.key is None]
    )
    outcome.update(
        await _store_keyed(
            session, embedder, settings, caller, [i for i in accepted if i.request.key is not None]
        )
    )
    await _keep_duplicates_alive(MemoryRepository(session), caller, accepted, outcome)
    return outcome


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    """The later of two expiries, None (never) being later than any instant."""
    return None if a is None or b is None else max(a, b)


async def _keep_duplicates_alive(
    repo: MemoryRepository, caller: Caller, items: list[_Prepared], outcome: dict[int, Outcome]
) -> None:
    """A write answered ``duplicate`` promises its own life: the copy it names lives as long
    as the longer of the two (a write without a TTL makes a copy with one permanent), and
    the answer's ``expires_at`` is the copy's, as stored. Sets each duplicate item's
    ``expires_at`` to what the store keeps."""
    wanted: dict[uuid.UUID, datetime | None] = {}
    duplicates = [i for i in items if i.index in outcome and outcome[i.index][0] == "duplicate"]
    for i in duplicates:
        copy = outcome[i.index][1]
        wanted[copy] = _later(wanted[copy], i.expires_at) if copy in wanted else i.expires_at
    stored = await repo.extend_life(caller.org_id, wanted)
    for i in duplicates:
        i.expires_at = stored.get(outcome[i.index][1])


async def _embed_and_probe(
    repo: MemoryRepository,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    fresh: list[_Prepared],
) -> tuple[list[list[float]], dict[int, list[tuple[uuid.UUID, str, float]]]]:
    """One model call for the items to store, then their near duplicates within the
    duplicate reach (``{index: [(id, name, cosine)]}``)."""
    vectors = await embedder.embed_documents([document_text(i.name, i.content) for i in fresh])
    near = await repo.near_duplicates(
        caller.org_id,
        [
            (i.index, i.request.namespace, i.request.type, i.request.project, i.request.agent_id, v)
            for i, v in zip(fresh, vectors, strict=True)
        ],
        settings.near_duplicate_threshold,
        settings.near_duplicate_limit,
        caller.projects,
    )
    return vectors, near


async def _store_keyed(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    items: list[_Prepared],
) -> dict[int, Outcome]:
    """Steps 4-5 for items with a key, by the rules of domain/keyed_writes.py."""
    outcome: dict[int, Outcome] = {}
    if not items:
        return outcome
    repo = MemoryRepository(session)
    keys = [(i.request.namespace, i.request.key or "") for i in items]
    await repo.lock_keys(caller.org_id, keys)
    # An expired memory holding the key or the content is gone for every read: purge it first
    # (audited like the expiry job), so the write is not a duplicate of, nor an update to,
    # something nobody can read.
    await purge_colliding(
        session, caller.org_id, list({(i.request.namespace, i.hash) for i in items}), named=keys
    )
    current = await repo.current_by_keys(caller.org_id, keys)
    # Copies of the content only within each write's duplicate reach (never out of reach).
    same = await repo.keyed_copies(
        caller.org_id,
        [(i.index, *i.content_key, i.request.key or "") for i in items],
        caller.projects,
    )
    for i in items:
        i.supersedes = i.request.supersedes
    plans = {
        i.index: plan_keyed_write(
            i.request.key or "",
            i.hash,
            current.get((i.request.namespace, i.request.key or "")),
            same.get(i.index),
            caller.projects,
            i.prefix,
            project=i.request.project,
            agent_id=i.request.agent_id,
        )
        for i in items
    }
    fresh = [i for i in items if plans[i.index].action == "insert"]
    ids = {i.index: uuid.uuid4() for i in fresh}
    final = {i.index: ids.get(i.index) or plans[i.index].existing_id for i in items}
    # Supersede the key's holder before its successor takes the key: the partial unique index
    # admits one current memory per key.
    replaced: list[tuple[uuid.UUID, uuid.UUID]] = [
        (p.superseded_id, final[idx])  # type: ignore[misc]
        for idx, p in plans.items()
        if p.superseded_id is not None and p.action != "duplicate"
    ]
    await repo.mark_superseded(caller.org_id, replaced)
    for i in items:
        if plans[i.index].action == "claim" and not await repo.claim_key(
            caller.org_id, final[i.index], i.request.key or ""  # type: ignore[arg-type]
        ):
            # A concurrent keyed write gave this content another key first; the caller's
            # transaction is rolled back and a retry sees that key (a 409 naming it).
            raise Conflict(
                "a concurrent write stored this content under another key; retry",
                field=f"{i.prefix}content",
            )
    near: dict[int, list[tuple[uuid.UUID, str, float]]] = {}
    if fresh:
        vectors, near = await _embed_and_probe(repo, embedder, settings, caller, fresh)
        inserted = await repo.insert_many(
            [
                {**_row(caller, i, ids[i.index], vec), "key": i.request.key}
                for i, vec in zip(fresh, vectors, strict=True)
            ]
        )
        for i in fresh:
            if i.content_key not in inserted:
                # A concurrent write without a key stored this content first; the caller's
                # transaction is rolled back and a retry takes the key onto that memory.
                raise Conflict(
                    "a concurrent write stored this content first; retry",
                    field=f"{i.prefix}content",
                )
    for i in items:
        plan = plans[i.index]
        dups = [
            NearDuplicate(id=m, name=n, score=round(sc, 4))
            for m, n, sc in near.get(i.index, [])
        ]
        outcome[i.index] = (plan.status, final[i.index], dups, plan.superseded_id)  # type: ignore[assignment]
    await _link(repo, caller, fresh, outcome, replaced)
    return outcome


def _row(caller: Caller, i: _Prepared, memory_id: uuid.UUID, vec: list[float]) -> dict[str, Any]:
    """The memories row of a prepared item: only redacted text, never the request's own."""
    return {
        "org_id": caller.org_id,
        "id": memory_id,
        "namespace": i.request.namespace,
        "type": i.request.type,
        "name": i.name,
        "content": i.content,
        "content_hash": i.hash,
        "embedding": vec,
        "project": i.request.project,
        "domain": i.domain,
        "agent_id": i.request.agent_id,
        "tags": i.tags,
        "source": i.source,
        "origin": i.origin,
        "url": i.url,
        "valid_at": i.request.valid_at,
        "expires_at": i.expires_at,
        "meta": i.metadata,
    }


async def _link(
    repo: MemoryRepository,
    caller: Caller,
    created: list[_Prepared],
    outcome: dict[int, Outcome],
    replaced: list[tuple[uuid.UUID, uuid.UUID]],
) -> None:
    """Edges of newly stored memories: their ``related`` refs, ``supersedes`` (explicit or a
    re-assertion's chain head, and a key's predecessor, already marked), and their projects."""
    edges = [
        (outcome[i.index][1], ref.id, ref.relationship) for i in created for ref in i.request.related
    ]
    supersede = [(i.supersedes, outcome[i.index][1]) for i in created if i.supersedes]
    edges += [(new, old, "supersedes") for old, new in supersede]
    edges += [(new, old, "supersedes") for old, new in replaced]
    await repo.add_relations(caller.org_id, edges)
    await repo.mark_superseded(caller.org_id, supersede)
    await repo.ensure_projects(caller.org_id, {i.request.project for i in created if i.request.project})


async def _store_plain(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    accepted: list[_Prepared],
) -> dict[int, Outcome]:
    """Steps 4-5 for accepted items without a key."""
    repo = MemoryRepository(session)
    outcome: dict[int, Outcome] = {}
    if not accepted:
        return outcome
    for item in accepted:
        item.supersedes = item.request.supersedes
    fresh: list[_Prepared] = []
    repeats: dict[int, int] = {}  # item index -> index of the same content earlier in the batch
    near: dict[int, list[tuple[uuid.UUID, str, float]]]
    if len(accepted) == 1:
        # A single write: embed, then the exact and near duplicate checks in one round trip
        # (a duplicate's vector is wasted; a single write's latency is what matters).
        item = accepted[0]
        req = item.request
        vectors = await embedder.embed_documents([document_text(item.name, item.content)])
        exact, close = await repo.probe_one(
            caller.org_id,
            req.namespace,
            req.type,
            req.project,
            req.agent_id,
            item.hash,
            vectors[0],
            settings.near_duplicate_threshold,
            settings.near_duplicate_limit,
            caller.projects,
        )
        if exact is not None and exact[1]:
            outcome[item.index] = ("duplicate", exact[0], [], None)
            return outcome
        if exact is not None:
            await _reassert(repo, caller, item, exact[0])
        fresh, near = [item], {item.index: close}
    else:
        # A batch: exact duplicates first (against the store, and within the batch), so a
        # re-sent batch costs no model time.
        existing = await repo.existing_by_hash(
            caller.org_id,
            [(i.index, *i.content_key) for i in accepted],
            caller.projects,
        )
        first_in_batch: dict[tuple[str, str | None, str | None, str], _Prepared] = {}
        for item in accepted:
            match = existing.get(item.index)
            if match is not None and match[1]:
                outcome[item.index] = ("duplicate", match[0], [], None)
            elif item.content_key in first_in_batch:
                repeats[item.index] = first_in_batch[item.content_key].index
            else:
                if match is not None:
                    await _reassert(repo, caller, item, match[0])
                first_in_batch[item.content_key] = item
                fresh.append(item)
        if not fresh:
            return outcome
        vectors, near = await _embed_and_probe(repo, embedder, settings, caller, fresh)
    ids = {i.index: uuid.uuid4() for i in fresh}
    rows = [_row(caller, i, ids[i.index], vec) for i, vec in zip(fresh, vectors, strict=True)]
    inserted = await repo.insert_many(rows)
    # Anything not inserted lost a race with a concurrent identical write: a duplicate of
    # the winner, which holds the same content key (so lies within the write's reach).
    raced = [i.content_key for i in fresh if i.content_key not in inserted]
    if raced:
        inserted_or_existing = {**inserted, **await repo.current_by_key(caller.org_id, raced)}
    else:
        inserted_or_existing = inserted
    for item in fresh:
        new_id = inserted_or_existing[item.content_key]
        status = "created" if item.content_key in inserted else "duplicate"
        dups = [NearDuplicate(id=m, name=n, score=round(s, 4)) for m, n, s in near.get(item.index, [])]
        outcome[item.index] = (status, new_id, dups, None)
    for index, first in repeats.items():
        outcome[index] = ("duplicate", outcome[first][1], [], None)

    await _link(repo, caller, [i for i in fresh if outcome[i.index][0] == "created"], outcome, [])
    return outcome


def scanned_bytes(req: RememberRequest) -> int:
    """The text of one write the redactor would scan, in UTF-8 bytes (an item over the gate's
    size is refused before any scan, but its bytes still count: they were sent)."""
    texts = (req.content, req.name, req.source, req.url, req.domain, req.origin, *req.tags)
    size = sum(len(t.encode()) for t in texts if t)
    if req.metadata:
        size += len(json.dumps(req.metadata, default=str).encode())
    return size


def check_scanned_bytes(size: int, settings: Settings, field_name: str) -> None:
    """413 when one call would have more than ``max_scanned_bytes`` of text redacted: the
    redactor's worst case is about a second of CPU per MB, so a call's text is bounded."""
    if size > settings.max_scanned_bytes:
        raise PayloadTooLarge(
            f"{field_name}: {size} bytes of text to scan; at most {settings.max_scanned_bytes} "
            "per call (split the batch)",
            field=field_name,
        )


def _check_batch_keys(items: list[_Prepared]) -> None:
    """422 when a batch names one key twice in a namespace, or stores one content under two
    keys: which should win is the caller's to say."""
    seen: dict[tuple[str, str], int] = {}
    content: dict[tuple[str, str], int] = {}
    for item in items:
        if item.request.key is None:
            continue
        where = (item.request.namespace, item.request.key)
        if where in seen:
            raise InvalidInput(
                f"items.{item.index}.key", f"key repeated in this batch (items.{seen[where]}.key)"
            )
        seen[where] = item.index
        if item.rejection is None:
            same = (item.request.namespace, item.hash)
            if same in content:
                raise InvalidInput(
                    f"items.{item.index}.content",
                    f"same content as items.{content[same]} under another key",
                )
            content[same] = item.index


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
    ctx.namespace = req.namespace
    item = await asyncio.to_thread(
        _prepare, 0, req, caller, settings, WritePipeline.for_settings(settings), ""
    )
    ctx.request = _request_summary([item])
    if item.rejection is not None:
        _count([item], {"rejected": 1})
        raise GateRejected([r.model_dump() for r in item.rejection])
    await _validate_links(MemoryRepository(session), caller, [item], None)
    status, memory_id, dups, superseded = (await _store(session, embedder, settings, caller, [item]))[0]
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
) -> RememberBatchResponse:
    """Store up to ``max_batch_items`` memories with one model call. A gate rejection or a
    duplicate is an outcome of that item only; invalid input (422) or a namespace/project
    outside the key's reach (403) refuses the whole batch, naming the item, and stores
    nothing."""
    caller.require("write")
    if len(req.items) > settings.max_batch_items:
        raise InvalidInput("items", f"{len(req.items)} items; at most {settings.max_batch_items} per batch")
    pipeline = WritePipeline.for_settings(settings)

    def prepare_all() -> list[_Prepared]:
        check_scanned_bytes(sum(scanned_bytes(r) for r in req.items), settings, "items")
        return [_prepare(i, r, caller, settings, pipeline, f"items.{i}.") for i, r in enumerate(req.items)]

    items = await asyncio.to_thread(prepare_all)
    _check_batch_keys(items)
    written_in = {i.request.namespace for i in items}
    ctx.namespace = next(iter(written_in)) if len(written_in) == 1 else None
    ctx.request = _request_summary(items)
    await _validate_links(MemoryRepository(session), caller, [i for i in items if i.rejection is None], "items.")
    stored = await _store(session, embedder, settings, caller, items)

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
