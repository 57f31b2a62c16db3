"""domain/writes/apply.py: carrying out the plans of one call. A batch asks the model once
for the items it stores (none for a re-sent batch: exact duplicates are found first, in the
store and within the batch); a duplicate keeps its copy alive for the longer of the two lives;
a new memory's links, supersession and project are written with it. That each write rule
holds on every path is tests/domain/writes/test_every_path.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain.auth import Caller
from service.domain.write_pipeline import WritePipeline
from service.domain.writes import apply
from service.domain.writes.apply import later, store_items
from service.domain.writes.prepare import WriteItem, prepare
from service.embedding import AsyncEmbedder
from service.schemas.memories import RememberRequest
from service.store.memories import MemoryRepository
from tests.conftest import Key, SqlRows
from tests.domain.conftest import caller_of

FACTS = [
    "The staging database listens on port 5433; the default 5432 is the legacy cluster.",
    "Deploys freeze on Fridays after noon until the release manager signs off.",
    "The billing export runs nightly at 02:00 UTC and writes to the archive bucket.",
]


class Counting:
    """The app's embedder, counting the model calls a write makes."""

    def __init__(self, inner: AsyncEmbedder) -> None:
        self.inner = inner
        self.calls: list[int] = []

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return await self.inner.embed_documents(texts)

    async def embed_matrix(self, texts: list[str]) -> Any:
        self.calls.append(len(texts))
        return await self.inner.embed_matrix(texts)


def items(app: FastAPI, caller: Caller, *bodies: dict[str, Any]) -> list[WriteItem]:
    settings = app.state.ctx.settings
    pipeline = WritePipeline.for_settings(settings)
    requests = [RememberRequest.model_validate({"namespace": "alice", **b}) for b in bodies]
    return [
        prepare(n, r, caller, settings, pipeline, f"items.{n}.") for n, r in enumerate(requests)
    ]


async def store(app: FastAPI, session: AsyncSession, caller: Caller, *bodies: dict[str, Any]):  # type: ignore[no-untyped-def]
    model = Counting(app.state.ctx.embedder)
    out = await store_items(
        session, model, app.state.ctx.settings, caller, items(app, caller, *bodies)
    )  # type: ignore[arg-type]
    return out, model.calls


async def test_a_batch_asks_the_model_once_and_a_resent_batch_not_at_all(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    bodies = [{"content": f} for f in FACTS] + [{"content": FACTS[0]}]
    first, calls = await store(app, session, caller, *bodies)
    assert calls == [3]  # the repeat within the batch is not embedded
    assert [first[n][0] for n in range(4)] == ["created"] * 3 + ["duplicate"]
    assert first[3][1] == first[0][1]
    again, calls = await store(app, session, caller, *bodies)
    assert calls == []
    assert [again[n][:2] for n in range(4)] == [("duplicate", first[n][1]) for n in range(4)]


SERVICES = ["billing", "search", "ingest", "mailer", "scheduler", "gateway", "ledger", "cache"]
REGIONS = ["frankfurt", "oregon", "tokyo", "sydney", "virginia"]


def runbook(n: int, verb: str = "drain") -> str:
    """A distinct fact per ``n`` (its own service, region and numbers); ``verb`` changes one
    word, which leaves it a near duplicate of the same ``n`` with another verb."""
    service, region = SERVICES[n % len(SERVICES)], REGIONS[n // len(SERVICES) % len(REGIONS)]
    return (
        f"Before patching {service} in {region}, {verb} queue q{n * 7 + 3} and wait "
        f"{n + 2} minutes for lease {n * 13 + 1} to expire."
    )


async def test_a_big_batch_probes_beside_its_insert_and_lists_what_a_sequential_probe_lists(
    app: FastAPI, session: AsyncSession, key: Key, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = await caller_of(session, key)
    n = apply.PROBE_BESIDE_MIN + 8
    originals, _ = await store(app, session, caller, *[{"content": runbook(i)} for i in range(n)])
    await session.commit()
    # Each item a near copy of one stored memory, and of its neighbour in the batch (the
    # same fact, a third verb), which no probe may list: it is the batch's own.
    batch = [{"content": runbook(i // 2, "empty" if i % 2 else "flush")} for i in range(2 * n)]
    probed_on: list[AsyncSession] = []
    real = apply.probe_fresh

    async def spy(repo: MemoryRepository, *args: Any) -> Any:
        probed_on.append(repo.session)
        return await real(repo, *args)

    monkeypatch.setattr(apply, "probe_fresh", spy)
    beside, calls = await store(app, session, caller, *batch)
    assert calls == [2 * n]
    assert probed_on and all(s is not session for s in probed_on)  # its own connection
    await session.rollback()
    probed_on.clear()
    monkeypatch.setattr(apply, "PROBE_BESIDE_MIN", 10**6)
    sequential, _ = await store(app, session, caller, *batch)
    assert probed_on == [session]

    def listed(out: dict[int, Any]) -> dict[int, list[uuid.UUID]]:
        return {i: [d.id for d in out[i][2]] for i in range(2 * n)}

    assert [beside[i][0] for i in range(2 * n)] == ["created"] * (2 * n)
    assert listed(beside) == listed(sequential)
    for i in range(2 * n):
        assert listed(beside)[i][0] == originals[i // 2][1]  # its stored fact, first
    batch_ids = {beside[i][1] for i in range(2 * n)} | {sequential[i][1] for i in range(2 * n)}
    assert not batch_ids & {m for ids in listed(beside).values() for m in ids}


async def test_a_failed_probe_beside_the_insert_fails_the_batch_and_stores_nothing(
    app: FastAPI, session: AsyncSession, key: Key, monkeypatch: pytest.MonkeyPatch, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    real = apply.probe_fresh

    async def failing(repo: MemoryRepository, *args: Any) -> Any:
        if repo.session is not session:  # the probe on its own connection
            raise RuntimeError("probe failed")
        return await real(repo, *args)

    inserting: list[str] = []
    insert_many = MemoryRepository.insert_many

    async def slow_insert(repo: MemoryRepository, rows: Any) -> Any:
        inserting.append("started")
        await asyncio.sleep(0.05)  # still running when the probe fails
        out = await insert_many(repo, rows)
        inserting.append("done")
        return out

    monkeypatch.setattr(apply, "probe_fresh", failing)
    monkeypatch.setattr(MemoryRepository, "insert_many", slow_insert)
    bodies = [
        {"content": runbook(i), "namespace": "probe-fails"} for i in range(apply.PROBE_BESIDE_MIN)
    ]
    with pytest.raises(RuntimeError, match="probe failed"):
        await store(app, session, caller, *bodies)
    # The error is raised once the INSERT is over, never while it still runs on the caller's
    # session; the caller's rollback then leaves nothing.
    assert inserting == ["started", "done"]
    await session.rollback()
    assert await sql("SELECT count(*) FROM memories WHERE namespace = 'probe-fails'") == [(0,)]


async def test_a_duplicate_keeps_its_copy_alive_for_the_longer_life(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    soon, later_on = (datetime.now(UTC) + timedelta(hours=h) for h in (1, 48))
    made, _ = await store(
        app, session, caller, {"content": FACTS[0], "expires_at": soon.isoformat()}
    )
    await store(app, session, caller, {"content": FACTS[0], "expires_at": later_on.isoformat()})
    await session.commit()
    (row,) = await sql("SELECT expires_at FROM memories WHERE id = :i", i=made[0][1])
    assert row[0] == later_on
    await store(app, session, caller, {"content": FACTS[0]})  # no TTL: the copy is kept
    await session.commit()
    (row,) = await sql("SELECT expires_at FROM memories WHERE id = :i", i=made[0][1])
    assert row[0] is None


async def test_one_call_gives_each_copy_the_longer_of_its_lives(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    """``extend_life`` over several memories at once (one statement): a later wanted expiry
    wins, an earlier one does not, "never" (None) beats any instant, and a memory that never
    expires keeps never expiring."""
    caller = await caller_of(session, key)
    soon, later_on = (datetime.now(UTC) + timedelta(hours=h) for h in (1, 48))
    lives = [soon, later_on, None, soon]
    made, _ = await store(
        app,
        session,
        caller,
        *[
            {"content": f, **({"expires_at": e.isoformat()} if e else {})}
            for f, e in zip(
                [*FACTS, "Incident reviews are written within two working days of the fix."],
                lives,
                strict=True,
            )
        ],
    )
    ids = [made[n][1] for n in range(4)]
    wanted = {ids[0]: later_on, ids[1]: soon, ids[2]: soon, ids[3]: None}
    stored = await MemoryRepository(session).extend_life(caller.org_id, wanted)
    assert stored == {ids[0]: later_on, ids[1]: later_on, ids[2]: None, ids[3]: None}


def test_the_later_life_of_two_is_none_when_either_never_ends() -> None:
    now = datetime.now(UTC)
    assert later(now, now + timedelta(seconds=1)) == now + timedelta(seconds=1)
    assert later(None, now) is None and later(now, None) is None


async def test_a_new_memory_is_written_with_its_links_supersession_and_project(
    app: FastAPI, session: AsyncSession, key: Key, sql: SqlRows
) -> None:
    caller = await caller_of(session, key)
    base, _ = await store(app, session, caller, {"content": FACTS[0]}, {"content": FACTS[1]})
    old, other = base[0][1], base[1][1]
    new, _ = await store(app, session, caller, {
        "content": FACTS[2], "project": "billing", "supersedes": str(old),
        "related": [{"id": str(other), "relationship": "depends_on"}],
    })  # fmt: skip
    await session.commit()
    new_id = new[0][1]
    edges = await sql(
        "SELECT target_id, relationship FROM relations WHERE org_id = :o AND source_id = :s",
        o=key.org_id, s=new_id,
    )  # fmt: skip
    assert sorted((t, r) for t, r in edges) == sorted([(other, "depends_on"), (old, "supersedes")])
    (row,) = await sql("SELECT superseded_by FROM memories WHERE id = :i", i=old)
    assert row[0] == new_id
    assert (
        await sql("SELECT 1 FROM projects WHERE org_id = :o AND id = 'billing'", o=key.org_id) != []
    )


async def test_a_gate_rejected_item_is_not_stored(
    app: FastAPI, session: AsyncSession, key: Key
) -> None:
    caller = await caller_of(session, key)
    prepared = items(app, caller, {"content": "ok"}, {"content": FACTS[0]})
    assert prepared[0].rejection is not None
    out = await store_items(
        session, app.state.ctx.embedder, app.state.ctx.settings, caller, prepared
    )
    assert set(out) == {1} and out[1][0] == "created"
    assert isinstance(out[1][1], uuid.UUID)
