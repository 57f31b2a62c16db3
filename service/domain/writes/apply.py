"""Write path, step 3: look up what the store holds for each prepared item, plan it
(writes/plan.py, pure) and carry the plan out.

For the items of one call, in the caller's transaction: purge an expired copy first; exact
and near duplicates within the duplicate reach (store.memories); ``plan_plain`` or, for keyed
items, ``plan_keyed`` (created, updated, duplicate, or a 409); a re-assertion supersedes its
chain's end (``reassert``); then one model call, one multi-row INSERT of the plans' rows
(``plan.row_values`` is the one place a memory row is built from a write), the links and
projects, and a duplicate keeps its copy alive as long as the longer life
(``keep_duplicates_alive``). Returns one ``Outcome`` per item: ``(status, id,
near_duplicates, superseded_id)``. ``apply_update`` carries out a PATCH's plan. Import and
the artifact's memory are planned by ``plan_import`` and ``plan_artifact_memory`` and insert
their rows through ``MemoryRepository.insert_rows`` from their own repositories (an import's
with its ids and times kept, an artifact's with its body in the same statement).

The call's audit row is not written here but by each caller, as its last write in the same
transaction: the row is the call's, not the write's. A batch's row counts its rejected items,
which never reach this module; an import runs this path's steps once per chunk of a file
and writes one row for the file; an artifact's row describes the body; a PATCH's row names
the fields it changed. What every path's row must hold (one row of the call, naming what it
stored, no secret) is tested over every path in tests/domain/writes/test_every_path.py.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.config import Settings
from service.domain.auth import Caller
from service.domain.expiry import purge_colliding
from service.domain.writes.plan import (
    WritePlan,
    embed_text,
    plan_keyed,
    plan_plain,
    supersedes_head,
)
from service.domain.writes.prepare import WriteItem
from service.embedding import AsyncEmbedder
from service.errors import Conflict
from service.schemas.memories import NearDuplicate
from service.store.memories import ContentKey, MemoryRepository
from service.store.vectors import VectorBatch

Outcome = tuple[str, uuid.UUID, list[NearDuplicate], uuid.UUID | None]


async def reassert(
    repo: MemoryRepository, caller: Caller, item: WriteItem, superseded: uuid.UUID
) -> None:
    """``item`` repeats the text of a superseded memory: unless the request names its own
    ``supersedes``, the new memory supersedes the current end of that memory's chain, when
    the key may write it and every reader of it can read the new memory: same namespace and
    diary, and the same project unless the new memory is shared (otherwise it is simply
    stored, and current: the end stays visible to those who cannot see the new memory)."""
    if item.request.supersedes is not None:
        return
    head = await repo.chain_head(caller.org_id, superseded)
    if head is not None and supersedes_head(
        item.request, head, caller.may_write_project(head.project)
    ):
        item.supersedes = head.id
        item.warnings.append(
            f"this text had been superseded; stored again as current, superseding {head.id}"
        )


async def store_items(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    items: list[WriteItem],
) -> dict[int, Outcome]:
    """Steps 4-5 for accepted items. Returns ``{index: (status, id, near_duplicates,
    superseded_id)}``. Items without a key first, so a keyed item can take the key onto an
    identical memory stored by the same batch.

    Every duplicate check runs within the duplicate reach (see the module docstring)."""
    accepted = [i for i in items if i.rejection is None]
    # An expired memory that is not purged yet must not make this write a "duplicate" of
    # something nobody can read any more: purge it first (audited like the expiry job).
    # Keyed writes purge theirs under their key locks (store_keyed), key holders included.
    await purge_colliding(
        session,
        caller.org_id,
        list({(i.request.namespace, i.hash) for i in accepted if i.request.key is None}),
    )
    outcome = await store_plain(
        session, embedder, settings, caller, [i for i in accepted if i.request.key is None]
    )
    outcome.update(
        await store_keyed(
            session, embedder, settings, caller, [i for i in accepted if i.request.key is not None]
        )
    )
    await keep_duplicates_alive(MemoryRepository(session), caller, accepted, outcome)
    return outcome


def later(a: datetime | None, b: datetime | None) -> datetime | None:
    """The later of two expiries, None (never) being later than any instant."""
    return None if a is None or b is None else max(a, b)


async def keep_duplicates_alive(
    repo: MemoryRepository, caller: Caller, items: list[WriteItem], outcome: dict[int, Outcome]
) -> None:
    """A write answered ``duplicate`` promises its own life: the copy it names lives as long
    as the longer of the two (a write without a TTL makes a copy with one permanent), and
    the answer's ``expires_at`` is the copy's, as stored. Sets each duplicate item's
    ``expires_at`` to what the store keeps."""
    wanted: dict[uuid.UUID, datetime | None] = {}
    duplicates = [i for i in items if i.index in outcome and outcome[i.index][0] == "duplicate"]
    for i in duplicates:
        copy = outcome[i.index][1]
        wanted[copy] = later(wanted[copy], i.expires_at) if copy in wanted else i.expires_at
    stored = await repo.extend_life(caller.org_id, wanted)
    for i in duplicates:
        i.expires_at = stored.get(outcome[i.index][1])


async def embed_fresh(
    embedder: AsyncEmbedder, fresh: list[tuple[WriteItem, WritePlan]]
) -> VectorBatch:
    """One model call for the items to store (their plans' ``embed_text``). The vectors come
    back as one ``VectorBatch`` (store/vectors.py), the model's matrix as it is
    (``AsyncEmbedder.embed_matrix``), whose rows the near-duplicate probe and the INSERT
    both bind."""
    return VectorBatch(await embedder.embed_matrix([p.embed_text or "" for _, p in fresh]))


async def probe_fresh(
    repo: MemoryRepository,
    settings: Settings,
    caller: Caller,
    fresh: list[tuple[WriteItem, WritePlan]],
    vectors: VectorBatch,
) -> dict[int, list[tuple[uuid.UUID, str, float]]]:
    """``fresh`` items' near duplicates within the duplicate reach (``{index: [(id, name,
    cosine)]}``), through ``repo``."""
    return await repo.near_duplicates(
        caller.org_id,
        [
            (i.index, i.request.namespace, i.request.type, i.request.project, i.request.agent_id, v)
            for (i, _), v in zip(fresh, vectors, strict=True)
        ],
        settings.near_duplicate_threshold,
        settings.near_duplicate_limit,
        caller.projects,
    )


def new_rows(
    fresh: list[tuple[WriteItem, WritePlan]], ids: dict[int, uuid.UUID], vectors: VectorBatch
) -> list[dict[str, Any]]:
    """The rows to insert for ``fresh`` items: each plan's values, its id and its vector."""
    return [
        {**p.values, "id": ids[i.index], "embedding": vec}
        for (i, p), vec in zip(fresh, vectors, strict=True)
    ]


PROBE_BESIDE_MIN = 32
"""From this many items to store, a batch's near-duplicate probe runs on a connection of its
own beside the INSERT (``embed_probe_insert``). Measured in process with the model stubbed
(medians of 30 batches, alternated): batches of 16, 32 and 64 over small namespaces took
the same time either way (15.3 / 15.7, 21.4 / 20.7, 31.4 / 31.6 ms beside / one after the
other); 32 into an indexed task namespace 49.6 / 55.2 ms, 64 into an indexed namespace of
60k memories 101 / 136 ms. A smaller batch gains nothing to pay for the second connection."""


async def embed_probe_insert(
    repo: MemoryRepository,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    fresh: list[tuple[WriteItem, WritePlan]],
    ids: dict[int, uuid.UUID],
) -> tuple[dict[ContentKey, uuid.UUID], dict[int, list[tuple[uuid.UUID, str, float]]]]:
    """A batch's items without a key to store (``store_plain``): one model call, then their
    near duplicates and their INSERT at the same time, the probe on a connection of its own
    and the INSERT in the caller's transaction, so Postgres runs them in two backends, one
    core each, while the model is idle. Both grow with a namespace's HNSW graph: 500 items
    into a namespace of 40-60k memories took 450-600 ms to insert and 270-310 ms to probe, one
    after the other.

    Returns the rows inserted (``{content key: id}``, as ``insert_many``) and each item's
    near duplicates (``{index: [(id, name, cosine)]}``).

    The probe sees what the store held before the batch, as it did run first in the
    caller's transaction: ``store_items`` has written nothing by then that it could see
    (``purge_colliding`` removes only expired memories, which no probe finds). Under
    ``PROBE_BESIDE_MIN`` items, or with a session bound to one connection, the two run one
    after the other in the caller's transaction."""
    vectors = await embed_fresh(embedder, fresh)
    rows = new_rows(fresh, ids, vectors)
    engine = repo.session.bind
    if len(fresh) < PROBE_BESIDE_MIN or not isinstance(engine, AsyncEngine):
        near = await probe_fresh(repo, settings, caller, fresh, vectors)
        return await repo.insert_many(rows), near

    async def beside() -> dict[int, list[tuple[uuid.UUID, str, float]]]:
        async with AsyncSession(engine) as side, side.begin():
            return await probe_fresh(MemoryRepository(side), settings, caller, fresh, vectors)

    # Both run to their end before either's error is raised: the caller's session must not
    # be rolled back while its INSERT is still running on it.
    probed, stored = await asyncio.gather(beside(), repo.insert_many(rows), return_exceptions=True)
    if isinstance(probed, BaseException):
        raise probed
    if isinstance(stored, BaseException):
        raise stored
    return stored, probed


async def store_keyed(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    items: list[WriteItem],
) -> dict[int, Outcome]:
    """Steps 4-5 for items with a key, by the rules of writes/keyed.py (``plan_keyed``)."""
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
    plans: dict[int, WritePlan] = {}
    for i in items:
        i.supersedes = i.request.supersedes
        plan = plan_keyed(
            caller.org_id,
            i,
            current.get((i.request.namespace, i.request.key or "")),
            same.get(i.index),
            caller.projects,
        )
        plan.refuse()
        plans[i.index] = plan
    fresh = [(i, plans[i.index]) for i in items if plans[i.index].action == "insert"]
    ids = {i.index: uuid.uuid4() for i, _ in fresh}
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
        if plans[i.index].action == "update" and not await repo.claim_key(
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
        vectors = await embed_fresh(embedder, fresh)
        near = await probe_fresh(repo, settings, caller, fresh, vectors)
        inserted = await repo.insert_many(new_rows(fresh, ids, vectors))
        for i, _ in fresh:
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
    await link(repo, caller, [i for i, _ in fresh], outcome, replaced)
    return outcome


async def link(
    repo: MemoryRepository,
    caller: Caller,
    created: list[WriteItem],
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


async def store_plain(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    accepted: list[WriteItem],
) -> dict[int, Outcome]:
    """Steps 4-5 for accepted items without a key (``plan_plain``)."""
    repo = MemoryRepository(session)
    outcome: dict[int, Outcome] = {}
    if not accepted:
        return outcome
    for item in accepted:
        item.supersedes = item.request.supersedes
    fresh: list[tuple[WriteItem, WritePlan]] = []
    repeats: dict[int, int] = {}  # item index -> index of the same content earlier in the batch
    near: dict[int, list[tuple[uuid.UUID, str, float]]]
    if len(accepted) == 1:
        # A single write: embed, then the exact and near duplicate checks in one round trip
        # (a duplicate's vector is wasted; a single write's latency is what matters).
        item = accepted[0]
        req = item.request
        vectors = VectorBatch(await embedder.embed_documents([embed_text(item)]))
        exact, close = await repo.probe_one(
            caller.org_id,
            req.namespace,
            req.type,
            req.project,
            req.agent_id,
            item.hash,
            vectors.row(0),
            settings.near_duplicate_threshold,
            settings.near_duplicate_limit,
            caller.projects,
        )
        plan = plan_plain(caller.org_id, item, exact)
        if plan.action == "duplicate":
            outcome[item.index] = ("duplicate", plan.existing_id, [], None)  # type: ignore[assignment]
            return outcome
        if plan.action == "supersede":
            await reassert(repo, caller, item, plan.existing_id)  # type: ignore[arg-type]
        fresh, near = [(item, plan)], {item.index: close}
        ids = {item.index: uuid.uuid4()}
        inserted = await repo.insert_many(new_rows(fresh, ids, vectors))
    else:
        # A batch: exact duplicates first (against the store, and within the batch), so a
        # re-sent batch costs no model time.
        existing = await repo.existing_by_hash(
            caller.org_id,
            [(i.index, *i.content_key) for i in accepted],
            caller.projects,
        )
        first_in_batch: dict[tuple[str, str | None, str | None, str], WriteItem] = {}
        for item in accepted:
            plan = plan_plain(caller.org_id, item, existing.get(item.index))
            if plan.action == "duplicate":
                outcome[item.index] = ("duplicate", plan.existing_id, [], None)  # type: ignore[assignment]
            elif item.content_key in first_in_batch:
                repeats[item.index] = first_in_batch[item.content_key].index
            else:
                if plan.action == "supersede":
                    await reassert(repo, caller, item, plan.existing_id)  # type: ignore[arg-type]
                first_in_batch[item.content_key] = item
                fresh.append((item, plan))
        if not fresh:
            return outcome
        ids = {i.index: uuid.uuid4() for i, _ in fresh}
        inserted, near = await embed_probe_insert(repo, embedder, settings, caller, fresh, ids)
    # Anything not inserted lost a race with a concurrent identical write: a duplicate of
    # the winner, which holds the same content key (so lies within the write's reach).
    raced = [i.content_key for i, _ in fresh if i.content_key not in inserted]
    if raced:
        inserted_or_existing = {**inserted, **await repo.current_by_key(caller.org_id, raced)}
    else:
        inserted_or_existing = inserted
    for item, _ in fresh:
        new_id = inserted_or_existing[item.content_key]
        status = "created" if item.content_key in inserted else "duplicate"
        dups = [NearDuplicate(id=m, name=n, score=round(s, 4)) for m, n, s in near.get(item.index, [])]
        outcome[item.index] = (status, new_id, dups, None)
    for index, first in repeats.items():
        outcome[index] = ("duplicate", outcome[first][1], [], None)

    await link(repo, caller, [i for i, _ in fresh if outcome[i.index][0] == "created"], outcome, [])
    return outcome


async def apply_update(
    repo: MemoryRepository, embedder: AsyncEmbedder, caller: Caller, plan: WritePlan
) -> None:
    """Carry out a PATCH's ``update`` plan: embed its text when the name or content changed,
    write the columns, and record a new project."""
    assert plan.existing_id is not None
    values = dict(plan.values)
    if plan.embed_text is not None:
        values["embedding"] = (await embedder.embed_documents([plan.embed_text]))[0]
    await repo.update(caller.org_id, plan.existing_id, values)
    if values.get("project"):
        await repo.ensure_projects(caller.org_id, {values["project"]})
