"""A big namespace's own indexes (store/namespace_indexes.py): built above the threshold,
dropped when the namespace shrinks to half of it, rebuilt when a build failed half-way, and
taken by the statements that name the namespace (the wide pack and the duplicate probe)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.domain import ranking
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes
from service.store.namespace_indexes import TEXT, VECTOR, index_name
from service.store.retrieval import RankingPlan, RetrievalRepository, Scope
from tests.conftest import Key, Seeder

GOAL = "blue green deploy pipeline health checks"


def _names(org_id: uuid.UUID, namespace: str) -> set[str]:
    return {index_name(org_id, namespace, kind) for kind in (VECTOR, TEXT)}


async def _indexed(app: FastAPI, org_id: uuid.UUID, namespaces: list[str]) -> set[str]:
    async with app.state.ctx.sessionmaker() as session:
        return set(await namespace_indexes.indexed_namespaces(session, org_id, namespaces))


async def _delete(app: FastAPI, org_id: uuid.UUID, namespace: str, keep: int) -> None:
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text(
                "DELETE FROM memories WHERE org_id = :org AND id IN ("
                " SELECT id FROM memories WHERE org_id = :org AND namespace = :ns"
                " ORDER BY id OFFSET :keep)"
            ),
            {"org": org_id, "ns": namespace, "keep": keep},
        )
        await session.commit()


async def test_a_big_namespace_gets_its_own_indexes_and_loses_them_when_it_shrinks(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    for n in range(6):
        await seed.add(f"{GOAL}, team note {n}", namespace="team")
    for n in range(2):
        await seed.add(f"{GOAL}, session note {n}", namespace="team:s1")
    engine = app.state.ctx.engine
    scope = ["team", "team:s1"]

    built = await namespace_indexes.sync(engine, 4, org_id=key.org_id)
    assert set(built.built) == _names(key.org_id, "team")
    assert await _indexed(app, key.org_id, scope) == {"team"}
    # The graph is built with the module's parameters (on Citus, on each shard).
    async with engine.connect() as conn:
        options = (
            (
                await conn.execute(
                    text(
                        "SELECT array_to_string(reloptions, ',') FROM pg_class"
                        " WHERE relname LIKE CAST(:name AS text) || '%'"
                    ),
                    {"name": index_name(key.org_id, "team", VECTOR)},
                )
            )
            .scalars()
            .all()
        )
    assert options and all(
        o
        == f"m={namespace_indexes.HNSW_M},ef_construction={namespace_indexes.HNSW_EF_CONSTRUCTION}"
        for o in options
    )
    # Nothing to do the second time.
    assert await namespace_indexes.sync(engine, 4, org_id=key.org_id) == (
        namespace_indexes.SyncReport()
    )

    # Down to 3 (above half the threshold): kept, so a namespace near it is not rebuilt
    # back and forth; down to 2: dropped.
    await _delete(app, key.org_id, "team", keep=3)
    assert (await namespace_indexes.sync(engine, 4, org_id=key.org_id)).dropped == ()
    await _delete(app, key.org_id, "team", keep=2)
    dropped = await namespace_indexes.sync(engine, 4, org_id=key.org_id)
    assert set(dropped.dropped) == _names(key.org_id, "team")
    assert await _indexed(app, key.org_id, scope) == set()


async def test_a_namespace_is_quoted_into_its_index_predicate(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """The predicate's values are quoted by Postgres (``format``'s %L): a namespace with a
    quote and a backslash gets indexes that its statements prove and take."""
    odd = "o'brien\\team"
    for n in range(3):
        await seed.add(f"{GOAL}, note {n}", namespace=odd)
    report = await namespace_indexes.sync(app.state.ctx.engine, 2, org_id=key.org_id)
    assert set(report.built) == _names(key.org_id, odd)
    plan = await _wide_plan(app, Scope(org_id=key.org_id, namespaces=[odd]))
    assert index_name(key.org_id, odd, VECTOR) in plan


async def test_a_build_that_failed_half_way_is_built_again(
    app: FastAPI, key: Key, seed: Seeder, on_citus: bool
) -> None:
    for n in range(3):
        await seed.add(f"{GOAL}, note {n}", namespace="ops")
    engine = app.state.ctx.engine
    await namespace_indexes.sync(engine, 2, org_id=key.org_id)
    broken = index_name(key.org_id, "ops", VECTOR)
    # What a cancelled CREATE INDEX CONCURRENTLY leaves: an index marked invalid.
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = CAST(:n AS regclass)"),
            {"n": broken},
        )
        await session.commit()
    namespace_indexes.forget_ready()
    assert await _indexed(app, key.org_id, ["ops"]) == set()
    report = await namespace_indexes.sync(engine, 2, org_id=key.org_id)
    assert report.built == (broken,)
    assert await _indexed(app, key.org_id, ["ops"]) == {"ops"}


async def _index_options(app: FastAPI, name: str) -> list[set[str]]:
    """The storage parameters of index ``name``: of the table's index and, on Citus, of each
    shard's (named ``<name>_<shard id>``)."""
    async with app.state.ctx.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT coalesce(reloptions, CAST('{}' AS text[])) FROM pg_class"
                " WHERE relname = CAST(:name AS text)"
                " OR relname ~ ('^' || CAST(:name AS text) || '_[0-9]+$')"
            ),
            {"name": name},
        )
        return [set(options) for (options,) in rows]


async def _ddl(app: FastAPI, *statements: str) -> None:
    async with app.state.ctx.engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        for sql in statements:
            await conn.exec_driver_sql(sql)


async def test_a_graph_built_with_other_parameters_is_rebuilt_on_request(
    app: FastAPI, key: Key, seed: Seeder, monkeypatch: Any
) -> None:
    """``ctxpack db index --rebuild``: a graph an earlier release built (ef_construction 64)
    is rebuilt with today's parameters under its own name; a pass without ``rebuild`` leaves
    it alone, a second rebuild finds nothing to do, and a rebuild that fails sets the old
    parameters back (so the next one tries again) and raises."""
    for n in range(3):
        await seed.add(f"{GOAL}, note {n}", namespace="legacy")
    engine = app.state.ctx.engine
    await namespace_indexes.sync(engine, 2, org_id=key.org_id)
    name = index_name(key.org_id, "legacy", VECTOR)
    current = set(namespace_indexes.GRAPH_OPTIONS)
    old = {f"m={namespace_indexes.HNSW_M}", "ef_construction=64"}
    assert current != old
    # What an earlier release built: the same index under the same name, ef_construction 64.
    await _ddl(
        app,
        f'ALTER INDEX "{name}" SET (ef_construction = 64)',
        f'REINDEX INDEX CONCURRENTLY "{name}"',
    )
    assert all(o == old for o in await _index_options(app, name))

    assert await namespace_indexes.sync(engine, 2, org_id=key.org_id) == (
        namespace_indexes.SyncReport()
    )
    assert all(o == old for o in await _index_options(app, name))

    # A rebuild that fails half-way: the old parameters are set back.
    monkeypatch.setattr(
        namespace_indexes,
        "REINDEX_SQL",
        "SELECT format('REINDEX INDEX CONCURRENTLY %I', CAST(:name AS text) || '_missing')",
    )
    with pytest.raises(Exception, match="_missing"):
        await namespace_indexes.sync(engine, 2, org_id=key.org_id, rebuild=True)
    assert all(o == old for o in await _index_options(app, name))
    monkeypatch.undo()

    report = await namespace_indexes.sync(engine, 2, org_id=key.org_id, rebuild=True)
    assert report.rebuilt == (name,)
    assert report.built == report.dropped == ()
    options = await _index_options(app, name)
    assert options and all(o == current for o in options)
    namespace_indexes.forget_ready()
    assert await _indexed(app, key.org_id, ["legacy"]) == {"legacy"}
    async with engine.connect() as conn:
        left = (
            await conn.execute(
                text("SELECT relname FROM pg_class WHERE relname LIKE CAST(:n AS text) || '%cc%'"),
                {"n": name},
            )
        ).all()
    assert left == []  # REINDEX CONCURRENTLY's transient indexes are gone
    plan = await _wide_plan(app, Scope(org_id=key.org_id, namespaces=["legacy"]))
    assert name in plan
    assert (await namespace_indexes.sync(engine, 2, org_id=key.org_id, rebuild=True)).rebuilt == ()


async def test_a_full_text_index_keeps_its_pending_list_short(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """A namespace's GIN index is built with a pending list of at most
    ``GIN_PENDING_LIST_KB`` (every read of the index scans the list whole), and one an
    earlier release built with the server's default (4 MB) gets it at the next pass: a
    catalog change, on each of its shards on Citus; a pass after that finds nothing to do."""
    for n in range(3):
        await seed.add(f"{GOAL}, note {n}", namespace="pending")
    engine = app.state.ctx.engine
    report = await namespace_indexes.sync(engine, 2, org_id=key.org_id)
    name = index_name(key.org_id, "pending", TEXT)
    assert name in report.built and report.tuned == ()
    current = set(namespace_indexes.TEXT_OPTIONS)
    assert current == {f"gin_pending_list_limit={namespace_indexes.GIN_PENDING_LIST_KB}"}
    assert (options := await _index_options(app, name)) and all(o == current for o in options)
    # What an earlier release built: the same index without the option.
    await _ddl(app, f'ALTER INDEX "{name}" RESET (gin_pending_list_limit)')
    assert all(o == set() for o in await _index_options(app, name))

    report = await namespace_indexes.sync(engine, 2, org_id=key.org_id)
    assert report.tuned == (name,)
    assert report.built == report.dropped == report.rebuilt == ()
    assert (options := await _index_options(app, name)) and all(o == current for o in options)
    assert await namespace_indexes.sync(engine, 2, org_id=key.org_id) == (
        namespace_indexes.SyncReport()
    )


def _plan(app: FastAPI) -> RankingPlan:
    """The hybrid recall plan of ``GOAL``."""
    return ranking.build_plan(
        ranking.PlanInputs(
            mode="hybrid",
            layer="recall",
            intent="general",
            query=GOAL,
            query_vector=FakeEmbedder().embed_query(GOAL),
            limit=10,
            domain=None,
            include_related=False,
            related_limit=0,
        ),
        app.state.ctx.settings,
    )


async def _wide_plan(app: FastAPI, scope: Scope) -> str:
    """EXPLAIN of the hybrid ranking statement ``rank`` runs for ``scope``, sequential scans
    priced out (the indexes it can read are named in it; on Citus, the worker's plan with
    the shard's index names)."""
    plans: list[str] = []
    async with app.state.ctx.sessionmaker() as session:
        real = session.execute

        async def explaining(statement: Any, params: Any = None, **kw: Any) -> Any:
            sql = getattr(statement, "text", "")
            if sql.lstrip().startswith("WITH"):
                # Tiny tables (a Citus shard holds a few rows) are cheaper to read whole: the
                # test asks whether the index can serve the statement, so sequential scans
                # are priced out for the EXPLAIN.
                await real(text("SET LOCAL enable_seqscan = off"))
                rows = await real(text(f"EXPLAIN {sql}"), params)
                await real(text("SET LOCAL enable_seqscan = on"))
                plans.append("\n".join(r[0] for r in rows))
            return await real(statement, params, **kw)

        session.execute = explaining  # type: ignore[method-assign]
        repo = RetrievalRepository(session)
        await repo.rank(scope, _plan(app), await repo.scope_size(scope, 10_001))
        await session.rollback()
    assert len(plans) == 1
    return plans[0]


async def test_a_wide_pack_reads_each_namespace_through_its_own_indexes(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """The HNSW index of the indexed namespace serves its branch; the small namespace of the
    same scope has none (its branch reads the btree). (Whether its GIN index or the btree
    reads a few rows' matches is the planner's choice by their costs.)"""
    for n in range(6):
        await seed.add(f"{GOAL}, note {n}", namespace="bob")
    await seed.add(f"{GOAL}, the task's note", namespace="bob:s1")
    await namespace_indexes.sync(app.state.ctx.engine, 4, org_id=key.org_id)
    plan = await _wide_plan(app, Scope(org_id=key.org_id, namespaces=["bob", "bob:s1"]))
    assert index_name(key.org_id, "bob", VECTOR) in plan
    assert index_name(key.org_id, "bob:s1", VECTOR) not in plan
    assert "ix_memories_embedding_hnsw" not in plan


async def test_a_scope_whose_namespaces_all_have_indexes_is_planned_once(
    app: FastAPI, key: Key, seed: Seeder, on_citus: bool
) -> None:
    """With its org and namespaces written into the text, the wide statement's plan is made
    once and kept with the prepared statement (the pack pool plans generically), and it
    ranks what the statement planned for the call's values ranks. On Citus, whose router
    needs every statement planned for its values, the namespaces stay parameters."""
    for n in range(6):
        await seed.add(f"{GOAL}, note {n}", namespace="dana")
        await seed.add(f"{GOAL}, session note {n}", namespace="dana:s1")
    await namespace_indexes.sync(app.state.ctx.engine, 4, org_id=key.org_id)
    assert await _indexed(app, key.org_id, ["dana", "dana:s1"]) == {"dana", "dana:s1"}
    scope = Scope(org_id=key.org_id, namespaces=["dana", "dana:s1"])
    async with app.state.ctx.pack_sessionmaker() as session:
        repo = RetrievalRepository(session)
        size = await repo.scope_size(scope, 10_001)
        # psycopg prepares a statement at its sixth execution on a connection
        packs = [await repo.rank(scope, _plan(app), size) for _ in range(8)]
        # one namespace not known as indexed: the statement is planned for its values
        custom = await repo.rank(scope, _plan(app), size, indexed=frozenset({"dana"}))
        kept = (
            await session.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                    " WHERE statement LIKE 'WITH%' AND statement LIKE :literal"
                ),
                {"literal": "%m.namespace = 'dana:s1'%"},
            )
        ).all()
    ranked = [[row.id for row in pack.rows] for pack in packs]
    assert len(ranked[0]) == 10 and all(ids == ranked[0] for ids in ranked)
    assert [row.id for row in custom.rows] == ranked[0]
    if on_citus:
        assert kept == []
    else:
        assert len(kept) == 1 and kept[0].generic_plans >= 3 and kept[0].custom_plans == 0


async def test_ready_indexes_are_read_from_the_catalog(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """The list of ready indexes is the catalog's (remembered for seconds, forgotten after a
    sync): an index dropped by hand leaves it."""
    for n in range(3):
        await seed.add(f"{GOAL}, note {n}", namespace="carol")
    await namespace_indexes.sync(app.state.ctx.engine, 2, org_id=key.org_id)
    assert await _indexed(app, key.org_id, ["carol"]) == {"carol"}
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(text(f"DROP INDEX {index_name(key.org_id, 'carol', TEXT)}"))
        await session.commit()
    namespace_indexes.forget_ready()
    assert await _indexed(app, key.org_id, ["carol"]) == set()


async def test_the_job_runs_in_the_app(app: FastAPI, app_with: Any) -> None:
    # The sync lock is held meanwhile, so the job's whole-database pass is skipped rather
    # than dropping the indexes other tests built for their small namespaces (and, cancelled
    # in a CREATE INDEX at shutdown, running on into the tests after this one).
    async with app.state.ctx.engine.connect() as holder:
        await holder.execute(
            text("SELECT pg_advisory_lock(:k)"), {"k": namespace_indexes.SYNC_LOCK_KEY}
        )
        try:
            async with app_with(namespace_index_interval_seconds=3600) as client:
                task = client.app.state.namespace_index_task
                assert task is not None and not task.done()
        finally:
            await holder.execute(
                text("SELECT pg_advisory_unlock(:k)"), {"k": namespace_indexes.SYNC_LOCK_KEY}
            )
    async with app_with() as client:
        assert client.app.state.namespace_index_task is None
