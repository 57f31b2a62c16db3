"""Near-duplicate probes (store/memories.py): the exact scan of a namespace without indexes
of its own, its own HNSW index otherwise (store/namespace_indexes.py); both find the same
duplicates, in single and
batch writes, within the same reach (namespace, type)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.store import memories, namespace_indexes
from service.store.models import EMBEDDING_DIMS
from tests.conftest import Key

FIRST = "We chose Postgres full-text search over Elasticsearch to keep one datastore."
NEAR = "We chose Postgres full-text search over Elasticsearch, to keep one datastore!"
OTHER = "The staging database is reset every Sunday at 02:00 UTC by the ops cron job."


@pytest.fixture(params=["exact", "hnsw"])
def probe_path(
    request: pytest.FixtureRequest, app: FastAPI, key: Key, monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    """The path under test, and the calls that switched to HNSW (``use_indexes``)."""
    calls: list[Any] = []
    real = memories.use_indexes

    async def spy(session: Any, ef_search: int, **kwargs: Any) -> None:
        calls.append(ef_search)
        await real(session, ef_search, **kwargs)

    monkeypatch.setattr(memories, "use_indexes", spy)

    async def switch() -> None:
        """Called once the namespaces hold memories: on the HNSW path each of the org's
        namespaces then gets its own indexes (store/namespace_indexes.py), and probes go
        through them."""
        if request.param == "hnsw":
            await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)

    return [request.param, calls, switch]


async def _remember(client: httpx.AsyncClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/remember", json={"type": "decision", **body}, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


async def test_single_write_lists_its_near_duplicate(
    client: httpx.AsyncClient, auth: dict[str, str], probe_path: list[Any]
) -> None:
    path, calls, switch = probe_path
    ns = f"nd-single-{path}"
    await _remember(client, auth, namespace=ns, content=OTHER)
    first = await _remember(client, auth, namespace=ns, content=FIRST)
    await _remember(client, auth, namespace=ns + "-b", content=OTHER)
    await switch()
    near = await _remember(client, auth, namespace=ns, content=NEAR)
    assert near["status"] == "created"
    assert [d["id"] for d in near["near_duplicates"]] == [first["id"]]
    other_type = await _remember(client, auth, namespace=ns, type="gotcha", content=NEAR + " Yes.")
    assert other_type["near_duplicates"] == []
    elsewhere = await _remember(client, auth, namespace=ns + "-b", content=NEAR)
    assert elsewhere["near_duplicates"] == []
    assert bool(calls) == (path == "hnsw")


async def test_batch_lists_near_duplicates_per_item(
    client: httpx.AsyncClient, auth: dict[str, str], probe_path: list[Any]
) -> None:
    path, calls, switch = probe_path
    ns = f"nd-batch-{path}"
    first = await _remember(client, auth, namespace=ns, content=FIRST)
    await _remember(client, auth, namespace=ns + "-b", content=OTHER)
    await switch()
    items = [
        {"namespace": ns, "type": "decision", "content": NEAR},
        {"namespace": ns, "type": "decision", "content": OTHER},
        {"namespace": ns + "-b", "type": "decision", "content": NEAR},
    ]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 200, response.text
    found = [[d["id"] for d in i["near_duplicates"]] for i in response.json()["items"]]
    assert found == [[first["id"]], [], []]
    assert bool(calls) == (path == "hnsw")


def _unit(vector: np.ndarray) -> list[float]:
    return (vector / np.linalg.norm(vector)).tolist()


async def test_probes_crowding_a_namespace_find_what_one_probe_at_a_time_finds(
    app: FastAPI, key: Key, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many probes into one namespace without an index of its own are compared with it in one
    pass (``near_joined_sql``); each probe gets the same near duplicates as when probed alone
    (``near_exact_sql``): same namespace and type, within reach (project, diary, a key's
    projects), current and unexpired, at or above the threshold, the nearest ``limit``."""
    rng = np.random.default_rng(26)
    bases = [rng.standard_normal(EMBEDDING_DIMS) for _ in range(4)]
    past = datetime.now(UTC) - timedelta(days=1)
    rows: list[dict[str, Any]] = []

    def add(n: int, base: int, **extra: Any) -> dict[str, Any]:
        row = {
            "org_id": key.org_id,
            "id": uuid.uuid4(),
            "namespace": "crowd",
            "type": "decision",
            "name": f"crowd {n}",
            "content": f"Crowd memory {n}.",
            "content_hash": f"{n:064x}",
            "embedding": _unit(bases[base] + rng.normal(0, 0.05, EMBEDDING_DIMS)),
            **extra,
        }
        rows.append(row)
        return row

    for n in range(7):  # more near copies of base 0 than a probe lists
        add(n, 0)
    add(10, 1, type="gotcha")
    add(11, 1, project="p1")
    add(12, 1, project="p2")
    add(13, 1, agent_id="diary-a")
    add(14, 2, expires_at=past)
    newer = add(15, 2)
    add(16, 2, superseded_by=newer["id"])
    add(17, 3, namespace="crowd-b")
    async with app.state.ctx.sessionmaker() as session:
        await memories.MemoryRepository(session).insert_rows(rows, skip=None)
        await session.commit()

    def probe(i: int, base: int, type_: str = "decision", **where: Any) -> tuple[Any, ...]:
        vector = _unit(bases[base] + rng.normal(0, 0.05, EMBEDDING_DIMS))
        return (
            i,
            where.get("ns", "crowd"),
            type_,
            where.get("project"),
            where.get("agent"),
            vector,
        )

    probes = [
        probe(0, 0),
        probe(1, 1),
        probe(2, 1, "gotcha"),
        probe(3, 1, project="p1"),
        probe(4, 1, project="p2"),
        probe(5, 1, agent="diary-a"),
        probe(6, 2),
        probe(7, 3),
        probe(8, 3, ns="crowd-b"),
    ]
    joined: list[Any] = []
    real = memories.near_joined_sql

    def spy(key_projects: Any) -> str:
        joined.append(key_projects)
        return real(key_projects)

    monkeypatch.setattr(memories, "near_joined_sql", spy)
    for key_projects in ((), ("p1",)):
        async with app.state.ctx.sessionmaker() as session:
            repo = memories.MemoryRepository(session)
            together = await repo.near_duplicates(key.org_id, probes, 0.9, 5, key_projects)
            assert joined == [key_projects]  # one pass for crowd's eight probes
            joined.clear()
            alone: dict[int, Any] = {}
            for p in probes:
                alone.update(await repo.near_duplicates(key.org_id, [p], 0.9, 5, key_projects))
            assert joined == []  # each probe alone scans its namespace
        assert together == alone
        found = {i: {name for _, name, _ in hits} for i, hits in together.items()}
        assert len(found.pop(0)) == 5  # of the seven near copies, the nearest five
        assert [s for _, _, s in together[0]] == sorted(
            (s for _, _, s in together[0]), reverse=True
        )
        assert found == {
            2: {"crowd 10"},  # its type
            3: {"crowd 11"},  # its project
            **({} if key_projects else {4: {"crowd 12"}}),  # p2 is outside the key's reach
            5: {"crowd 13"},  # its diary
            6: {"crowd 15"},  # neither the expired copy nor the superseded one
            8: {"crowd 17"},
        }


async def test_namespaces_written_into_statements_stay_literals(
    app: FastAPI, client: httpx.AsyncClient, auth: dict[str, str], key: Key
) -> None:
    """Statements that write the org and namespaces into their text, so the planner proves a
    namespace index's predicate (a wide scope's ranking, a batch's probes of an indexed
    namespace), go through SQLAlchemy's ``text``, which reads ``:name`` as a parameter even
    inside quotes. A segment may end in ``-`` or ``.`` before the next ``:``."""
    ns = "lit-.:s-:t"
    first = await _remember(client, auth, namespace=ns, content=FIRST)
    await _remember(client, auth, namespace="lit-.", content=OTHER)
    await _remember(client, auth, namespace="lit-.:s-", content=OTHER)
    await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)
    context = await client.post(
        "/v1/context",
        json={"goal": "Postgres full-text search over Elasticsearch", "namespace": ns},
        headers=auth,
    )
    assert context.status_code == 200, context.text
    assert first["id"] in context.text
    items = [{"namespace": ns, "type": "decision", "content": f"{NEAR} ({n})"} for n in range(5)]
    response = await client.post("/v1/remember/batch", json={"items": items}, headers=auth)
    assert response.status_code == 200, response.text
    found = [[d["id"] for d in i["near_duplicates"]] for i in response.json()["items"]]
    assert all(first["id"] in ids for ids in found)


async def test_an_exact_probe_reads_only_the_current_rows_of_its_type(
    app: FastAPI, key: Key
) -> None:
    """A batch's probe of a namespace scanned exactly (``near_exact_sql``) goes through the
    index on (org_id, namespace, type) over current memories (migration 0010): it fetches
    from the heap only the rows it compares, not the namespace's other types nor superseded
    memories, and finds the same duplicate it would by reading them all."""
    rng = np.random.default_rng(29)
    base = _unit(rng.standard_normal(EMBEDDING_DIMS))
    rows: list[dict[str, Any]] = []
    for n in range(60):
        rows.append(
            {
                "org_id": key.org_id,
                "id": uuid.uuid4(),
                "namespace": "typed",
                "type": ("decision", "gotcha", "procedure")[n % 3],
                "name": f"typed {n}",
                "content": f"Typed memory {n}.",
                "content_hash": f"{n + 1000:064x}",
                "embedding": base if n == 3 else _unit(rng.standard_normal(EMBEDDING_DIMS)),
            }
        )
    # An older copy of the stored fact, superseded by it: the index leaves it out, as the
    # probe's reach does.
    rows.append(
        {
            **rows[3],
            "id": uuid.uuid4(),
            "name": "typed superseded",
            "content_hash": f"{999:064x}",
            "superseded_by": rows[3]["id"],
        }
    )
    # The org's other namespaces, as an org has them: by type alone the namespace's rows are
    # a few among many.
    for n in range(300):
        rows.append(
            {
                "org_id": key.org_id,
                "id": uuid.uuid4(),
                "namespace": f"typed-other-{n % 30}",
                "type": ("decision", "gotcha", "procedure")[n % 3],
                "name": f"other {n}",
                "content": f"Other memory {n}.",
                "content_hash": f"{n + 5000:064x}",
                "embedding": _unit(rng.standard_normal(EMBEDDING_DIMS)),
            }
        )
    probe = (0, "typed", "decision", None, None, np.asarray(base, dtype=np.float32))
    params = memories.probe_rows_params(key.org_id, [probe], 0.9, 5, [])
    sql = memories.near_exact_sql([])
    async with app.state.ctx.sessionmaker() as session:
        await memories.MemoryRepository(session).insert_rows(rows, skip=None)
        await session.commit()
        # Statistics as autovacuum would leave them: without them a shard of a few rows
        # (Citus) is priced as one page, where any index of the namespace looks as cheap.
        await session.execute(text("ANALYZE memories"))
        await session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(r[0] for r in await session.execute(text(f"EXPLAIN {sql}"), params))
        await session.rollback()
        found = await memories.MemoryRepository(session).near_duplicates(
            key.org_id, [probe], 0.9, 5
        )
    assert "ix_memories_live_org_id_namespace_type" in plan, plan
    assert [name for _, name, _ in found[0]] == ["typed 3"]


def _row(
    org_id: uuid.UUID, namespace: str, type_: str, n: int, vector: list[float]
) -> dict[str, Any]:
    return {
        "org_id": org_id,
        "id": uuid.uuid4(),
        "namespace": namespace,
        "type": type_,
        "name": f"{type_} {n}",
        "content": f"Memory {n} of type {type_}.",
        "content_hash": f"{n:064x}",
        "embedding": vector,
    }


FILLER_TYPES = ("decision", "plan", "task", "idea", "claim", "rule", "gotcha", "procedure")


async def test_an_indexed_probe_walks_the_graph_whatever_the_statistics_say(
    app: FastAPI, key: Key
) -> None:
    """A namespace with its own graph is probed through it even where the table's statistics
    make its rows of the probe's type look few: they lag the writes (ANALYZE waits for 10%
    of the table to change), and the planner sorted thousands of a type's rows through the
    btree, 5.5 ms a probe, where the graph answers in 0.5 (``NEAR_DUPLICATE_MAX_SCAN``).
    Sorts are allowed again for the write's later statements, and the duplicate is the one
    an exact scan finds."""
    rng = np.random.default_rng(31)
    ns = "walked"

    def unit() -> list[float]:
        return _unit(rng.standard_normal(EMBEDDING_DIMS))

    # The org's other namespaces, too small for indexes of their own, and the namespace,
    # as ANALYZE saw them: 300 decisions.
    rows = [
        _row(key.org_id, f"walked-other-{n % 50}", FILLER_TYPES[n % 8], n, unit())
        for n in range(5000)
    ]
    rows += [_row(key.org_id, ns, "decision", 10_000 + n, unit()) for n in range(300)]
    later = [_row(key.org_id, ns, "verification", 20_000 + n, unit()) for n in range(2500)]
    target = np.asarray(later[1234]["embedding"], dtype=np.float32)
    probe = (0, ns, "verification", None, None, target + np.float32(0.01))
    async with app.state.ctx.sessionmaker() as session:
        await memories.MemoryRepository(session).insert_rows(rows, skip=None)
        await session.commit()
        await session.execute(text("ANALYZE memories"))
        await session.commit()
    await namespace_indexes.sync(app.state.ctx.engine, 299, org_id=key.org_id)
    namespace_indexes.forget_ready()
    params = memories.probe_rows_params(key.org_id, [probe], 0.9, 5, [])
    sql = memories.near_indexed_sql(key.org_id, [ns], [])
    async with app.state.ctx.sessionmaker() as session:
        repo = memories.MemoryRepository(session)
        # Written since the statistics were taken: 2,500 rows of a type the namespace had
        # none of, which the graph holds and the statistics do not.
        await repo.insert_rows(later, skip=None)
        plan = "\n".join(
            r[0] for r in await repo._probe_rows(text(f"EXPLAIN {sql}"), params, walk=True)
        )
        sorts = (await session.execute(text("SHOW enable_sort"))).scalar_one()
        found = await repo.near_duplicates(key.org_id, [probe], 0.9, 5)
        await session.rollback()
    graph = namespace_indexes.index_name(key.org_id, ns, namespace_indexes.VECTOR)
    assert graph in plan, plan
    assert sorts == "on"
    assert [name for _, name, _ in found[0]] == ["verification 21234"]
