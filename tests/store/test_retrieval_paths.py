"""The ranking statement's two plans give the same pack: the exact scan of a narrow scope and
the index path of a wide one (a branch per namespace, through its own HNSW and GIN indexes
when it has them), scope included."""

from __future__ import annotations

import dataclasses
import json
import random
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from bench.ranking_explain import explaining_pipeline
from service import cache as cache_module
from service.domain import ranking
from service.domain.wake import select_wake
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes, retrieval
from service.store.retrieval import (
    NO_COMMON_TERMS_TTL,
    WIDE_RANDOM_PAGE_COST,
    RetrievalRepository,
    Scope,
    build_pack_sql,
    index_settings,
    shard_common_terms,
)
from tests.conftest import Key, Seeder

GOAL = "Fix the blue green deploy pipeline health checks"


def _plan(
    app: FastAPI,
    goal: str,
    *,
    mode: str = "hybrid",
    layer: str = "recall",
    limit: int = 10,
    related: int = 0,
) -> ranking.RankingPlan:
    """The plan ``compile_context`` would build for ``goal`` (general intent, no domain),
    with ``related`` related memories per item."""
    return ranking.build_plan(
        ranking.PlanInputs(
            mode=mode,  # type: ignore[arg-type]
            layer=layer,  # type: ignore[arg-type]
            intent="general",
            query=goal,
            query_vector=None if mode == "lexical" else FakeEmbedder().embed_query(goal),
            limit=limit,
            domain=None,
            include_related=related > 0,
            related_limit=related,
        ),
        app.state.ctx.settings,
    )


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
async def test_index_path_matches_exact_path(
    app: FastAPI, key: Key, seed: Seeder, mode: str
) -> None:
    expected = set()
    for n in range(12):
        expected.add(
            await seed.add(
                f"blue green deploy pipeline health checks, note {n}", namespace="alice:s1"
            )
        )
    await seed.add("blue green deploy pipeline health checks, sibling", namespace="alice:s2")
    await seed.add("blue green deploy pipeline health checks, diary", agent_id="other")
    await seed.add("Bananas are rich in potassium and taste sweet when ripe.")
    scope = Scope(org_id=key.org_id, namespaces=["alice", "alice:s1"])
    plan = _plan(app, GOAL, mode=mode, layer="deep_search", limit=50, related=3)
    results = []
    for wide in (False, True):
        if wide:  # each namespace gets its own HNSW and GIN index
            await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            if wide:
                assert await namespace_indexes.indexed_namespaces(
                    session, key.org_id, scope.namespaces
                ) == set(scope.namespaces)
            pack = await repo.rank(scope, plan, size, indexed=None if wide else frozenset())
            results.append(pack)
            await session.rollback()
    exact, indexed = results
    assert {r.id for r in exact.rows} == expected
    assert [r.id for r in indexed.rows] == [r.id for r in exact.rows]
    assert [round(r.score, 6) for r in indexed.rows] == [round(r.score, 6) for r in exact.rows]
    assert indexed.gated_out == exact.gated_out


def _lexical_plan(app: FastAPI, goal: str) -> ranking.RankingPlan:
    return _plan(app, goal, mode="lexical", layer="deep_search", limit=50)


def _indexed(scope: Scope, wide: bool) -> frozenset[str]:
    """The ``indexed`` argument of ``rank`` that takes the wide path (every namespace of the
    scope counted as indexed) or the exact one."""
    return frozenset(scope.namespaces) if wide else frozenset()


async def _rank(
    app: FastAPI, scope: Scope, plan: ranking.RankingPlan, common: dict[str, float] | None
) -> list[uuid.UUID]:
    async with app.state.ctx.sessionmaker() as session:
        repo = RetrievalRepository(session)
        size = await repo.scope_size(scope, 10_001)
        pack = await repo.rank(
            scope, plan, size, common_terms=common, indexed=_indexed(scope, True)
        )
        await session.rollback()
    return [r.id for r in pack.rows]


async def test_wide_scope_reads_only_the_matches_of_rare_terms(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """A common word (per the table's statistics) scores on the hits but brings none: the
    memory that holds only it leaves the lexical pack, the rare word's memories stay, and
    the one holding both still ranks first."""
    both = await seed.add("Caroline compared three adoption agencies in March.")
    rare = await seed.add("The adoption agencies want references from two friends.")
    common_only = [await seed.add(f"Caroline went hiking on trail {n}.") for n in range(2)]
    for n in range(20):
        await seed.add(f"Bananas are rich in potassium, batch {n}.")
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _lexical_plan(app, "What did Caroline learn about adoption agencies?")

    everything = await _rank(app, scope, plan, {})
    assert set(everything) == {both, rare, *common_only}

    selective = await _rank(app, scope, plan, {"carolin": 0.3})
    assert selective[0] == both
    assert set(selective) == {both, rare}


async def test_a_goal_of_common_words_only_reads_memories_holding_all_of_them(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    both = await seed.add("Caroline and Melanie painted the fence together.")
    await seed.add("Caroline painted alone.")
    await seed.add("Melanie went to the beach.")
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _lexical_plan(app, "Caroline Melanie")
    assert await _rank(app, scope, plan, {"carolin": 0.3, "melani": 0.2}) == [both]


async def test_common_terms_come_from_the_tables_statistics(app: FastAPI, seed: Seeder) -> None:
    """From ANALYZE's statistics of ``tsv``: on one node the table's own, on a Citus
    coordinator (where the distributed table has none) its shards', weighted by their rows."""
    # The word must be common in the whole table, which the suite's earlier tests fill: 3%
    # of its rows (at least 30) hold it.
    async with app.state.ctx.sessionmaker() as session:
        rows = (await session.execute(text("SELECT count(*) FROM memories"))).scalar_one()
    for n in range(max(30, -(-rows * 3 // 97))):
        await seed.add(f"Zanzibarian spice note number {n} about cloves.")
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(text("ANALYZE memories"))
        await session.commit()
        repo = RetrievalRepository(session)
        # Too small a table: nothing is common, every posting list is read whole.
        assert await repo.common_terms(0.011, 10**9) == {}
        common = await repo.common_terms(0.012, 0)
        await session.rollback()
    assert common.get("zanzibarian", 0) >= 0.012
    assert all(freq >= 0.012 for freq in common.values())


async def test_no_common_lexemes_is_asked_again_soon(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table below ``min_rows`` (or not analyzed yet) has no common lexemes; it may grow
    past that within minutes, so that answer is kept ``NO_COMMON_TERMS_TTL`` seconds, not
    the ``COMMON_TERMS_TTL`` of a real one (a scope of 100k rows then read every match of
    every goal word for 5 minutes: 140 ms against 44)."""
    asked: list[int] = []
    clock = [1000.0]
    monkeypatch.setattr(cache_module.time, "monotonic", lambda: clock[0])
    async with app.state.ctx.sessionmaker() as session:
        repo = RetrievalRepository(session)
        real = session.execute

        async def counting(statement: Any, *args: Any, **kwargs: Any) -> Any:
            if "most_common_elems" in getattr(statement, "text", ""):
                asked.append(1)
            return await real(statement, *args, **kwargs)

        session.execute = counting  # type: ignore[method-assign]
        min_rows = 10**9 + 7  # a key of its own: no earlier test's answer is cached
        assert await repo.common_terms(0.011, min_rows) == {}
        assert await repo.common_terms(0.011, min_rows) == {}
        assert len(asked) == 1
        clock[0] += NO_COMMON_TERMS_TTL + 0.001
        assert await repo.common_terms(0.011, min_rows) == {}
        assert len(asked) == 2
        await session.rollback()


def test_shard_statistics_are_weighted_by_their_rows() -> None:
    """A distributed table's frequency of a lexeme: its shards' frequencies weighted by
    their rows; a shard that does not list it counts it as absent; a shard never analyzed
    (no statistics) counts its rows only."""
    shards = [
        json.dumps({"rows": 300, "elems": ["alpha", "beta"], "freqs": [0.5, 0.1, 0.1, 0.5, 0]}),
        json.dumps({"rows": 100, "elems": ["alpha"], "freqs": [0.1, 0.1, 0.1, 0]}),
        json.dumps({"rows": 100, "elems": None, "freqs": None}),
    ]
    terms = shard_common_terms(shards, 0.05, 0)
    assert terms == {"alpha": pytest.approx((150 + 10) / 500), "beta": pytest.approx(30 / 500)}
    assert shard_common_terms(shards, 0.1, 0) == {"alpha": pytest.approx(0.32)}
    # Below min_rows (all shards' rows together) nothing is common.
    assert shard_common_terms(shards, 0.05, 501) == {}
    assert shard_common_terms([], 0.05, 0) == {}


async def test_the_wide_path_plans_each_call_for_its_values(app: FastAPI) -> None:
    """Generic plans (the pack pool's default) are off for the wide path's transaction: a
    generic plan of the HNSW statement, chosen after five calls, took 20-40x longer."""
    async with app.state.ctx.pack_sessionmaker() as session:
        repo = RetrievalRepository(session)
        await session.execute(text("BEGIN"))
        await repo.use_indexes(100)
        mode = (await session.execute(text("SHOW plan_cache_mode"))).scalar_one()
        await session.execute(text("ROLLBACK"))
    assert mode == "force_custom_plan"


async def test_the_wide_path_settings_reach_the_statements_of_the_scope(
    app: FastAPI, seed: Seeder
) -> None:
    """The settings of ``use_indexes`` hold where the scope's statements run: on one node its
    own session; on Citus the worker of the org's shard (propagated SET LOCAL)."""
    await seed.add("A memory so that the org's shard has a row to read.")
    async with app.state.ctx.pack_sessionmaker() as session:
        await session.execute(text("BEGIN"))
        await RetrievalRepository(session).use_indexes(123)
        row = (
            await session.execute(
                text(
                    "SELECT current_setting('hnsw.ef_search'),"
                    " current_setting('hnsw.iterative_scan'),"
                    " current_setting('random_page_cost')"
                    " FROM memories m WHERE m.org_id = :org LIMIT 1"
                ),
                {"org": seed.org_id},
            )
        ).one()
        await session.execute(text("ROLLBACK"))
    assert tuple(row) == ("123", "relaxed_order", str(WIDE_RANDOM_PAGE_COST))


@pytest.mark.parametrize(
    ("mode", "expected", "ef_search"),
    [("hybrid", 48, None), ("vector", 60, None), ("hybrid", 48, 8)],
)
async def test_the_vector_side_returns_its_own_candidates_on_both_paths(
    app: FastAPI,
    key: Key,
    seed: Seeder,
    mode: str,
    expected: int,
    ef_search: int | None,
    on_citus: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hybrid recall pack of 24 takes 48 vector candidates (limit x 2), a vector-only one
    96 (here all 60 memories), on the exact scan and through the namespace's HNSW index
    alike, whatever the search's width (``ef_search`` 8: pgvector's iterative scan goes on
    past it; the default hybrid width, 40, is below 48 too). The goal matches no word, so
    every candidate is a vector one. Each memory holds six of thirty made-up words, so that
    their vectors spread out as a model's do (HNSW over near-copies of one vector loses some
    of them). On one node the wide statement's plan is kept, to show that it walked the
    graph (a sorted scan of 60 rows would return them all whatever the width): the planner,
    which may price a sort of 60 rows below the graph once autovacuum has analyzed them, is
    told not to sort for that pass."""
    plan_lines: list[str] = []
    monkeypatch.setattr(
        retrieval,
        "pipelined_transaction",
        explaining_pipeline(retrieval.pipelined_transaction, plan_lines),
    )
    words = [f"{a}{b}" for a in ("bar", "kel", "mon", "dri", "fus", "tap") for b in "aeiou"]
    pick = random.Random(7)
    for n in range(60):
        await seed.add(" ".join(pick.sample(words, 6)) + f" note{n}")
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _plan(app, "zyzzyva", mode=mode, limit=24)
    if ef_search is not None:
        plan = dataclasses.replace(plan, hnsw_ef_search=ef_search)
    counts = []
    for wide in (False, True):
        if wide:
            await namespace_indexes.sync(app.state.ctx.engine, 0, org_id=key.org_id)
        async with app.state.ctx.pack_sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            if wide:
                await session.execute(text("SET enable_sort = off"))
            try:
                pack = await repo.rank(scope, plan, size, indexed=_indexed(scope, wide))
            finally:
                await session.execute(text("RESET enable_sort"))
            counts.append(pack.candidates)
    assert counts == [expected, expected]
    if not on_citus:
        assert any("_v on memories" in line for line in plan_lines), plan_lines


async def test_the_wide_path_prices_random_reads_for_hot_indexes(app: FastAPI) -> None:
    """For the wide path's transaction only: random_page_cost 1.1, so that the planner
    reads the GIN hits and filters them, not ANDs them with the namespace's whole bitmap."""
    async with app.state.ctx.pack_sessionmaker() as session:
        repo = RetrievalRepository(session)
        await session.execute(text("BEGIN"))
        before = (await session.execute(text("SHOW random_page_cost"))).scalar_one()
        await repo.use_indexes(100)
        during = (await session.execute(text("SHOW random_page_cost"))).scalar_one()
        await session.execute(text("ROLLBACK"))
        after = (await session.execute(text("SHOW random_page_cost"))).scalar_one()
    assert (before, during, after) == ("4", str(WIDE_RANDOM_PAGE_COST), "4")


@pytest.mark.parametrize("wide", [False, True])
async def test_the_relative_gate_drops_candidates_far_below_the_best(
    app: FastAPI, key: Key, seed: Seeder, wide: bool
) -> None:
    best = await seed.add(GOAL)
    weak = await seed.add("blue green deploy notes from the offsite, unrelated otherwise")
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _plan(app, GOAL)
    packs = []
    for share in (0.0, 0.95):
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            packs.append(
                await repo.rank(
                    scope,
                    dataclasses.replace(plan, relative_gate=share),
                    size,
                    indexed=_indexed(scope, wide),
                )
            )
            await session.rollback()
    opened, gated = packs
    assert [r.id for r in opened.rows] == [best, weak]
    assert [r.id for r in gated.rows] == [best]
    assert gated.gated_out == opened.gated_out + 1


@pytest.mark.parametrize("wide", [False, True])
async def test_a_memory_dated_in_the_goals_period_is_boosted(
    app: FastAPI, key: Key, seed: Seeder, wide: bool
) -> None:
    from service.domain.temporal import goal_periods

    goal = "blue green deploy pipeline health checks in May 2023"
    undated = await seed.add("blue green deploy pipeline health checks, first notes")
    dated = await seed.add(
        "blue green deploy pipeline health checks, second notes",
        valid_at=datetime(2023, 5, 8, 12, tzinfo=UTC),
    )
    other = await seed.add(
        "blue green deploy pipeline health checks, third notes",
        valid_at=datetime(2023, 7, 8, 12, tzinfo=UTC),
    )
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _plan(app, goal)
    periods = goal_periods(goal)
    boosted = dataclasses.replace(
        plan,
        date_starts=[p.start for p in periods],
        date_ends=[p.end for p in periods],
        date_boost=0.5,
    )
    packs = []
    for p in (plan, boosted):
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            packs.append(await repo.rank(scope, p, size, indexed=_indexed(scope, wide)))
            await session.rollback()
    plain, with_dates = packs
    before = {r.id: r.score for r in plain.rows}
    after = {r.id: r.score for r in with_dates.rows}
    assert set(before) == set(after) == {undated, dated, other}
    assert after[dated] == pytest.approx(before[dated] * 1.5)
    assert after[undated] == pytest.approx(before[undated])
    assert after[other] == pytest.approx(before[other])
    assert with_dates.rows[0].id == dated


async def _seed_lexeme_rarities(seed: Seeder) -> tuple[uuid.UUID, uuid.UUID]:
    """Memories whose lexemes have known dfs for the goal "zebra yak walrus deploy
    pipeline": zebra 1, deploy 5, pipelin 14 (the notes rank below the gate; they only
    count), and walrus and yak of one df (1). Returns the memory holding zebra, deploy and
    pipelin, and the one holding walrus, yak and pipelin."""
    all_three = await seed.add("The zebra crossing needs a deploy pipeline before Friday.")
    for n in range(4):
        await seed.add(f"Our deploy pipeline broke again, note {n}.")
    for n in range(8):
        await seed.add(f"A pipeline for the data warehouse, note {n}.")
    tied = await seed.add("Walrus and yak spotted near the pipeline.")
    return all_three, tied


@pytest.mark.parametrize("wide", [False, True])
async def test_matched_lexemes_come_rarest_first(
    app: FastAPI, key: Key, seed: Seeder, wide: bool
) -> None:
    """A pack item's matched lexemes (its reason) are ordered by idf, the rarest first, ties
    by lexeme, on both plans: the BM25 aggregates read them in lexeme order and the
    statement orders the returned rows' lists (``matched_by_idf``)."""
    all_three, tied = await _seed_lexeme_rarities(seed)
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = _lexical_plan(app, "zebra yak walrus deploy pipeline")
    async with app.state.ctx.sessionmaker() as session:
        repo = RetrievalRepository(session)
        size = await repo.scope_size(scope, 10_001)
        pack = await repo.rank(scope, plan, size, common_terms={}, indexed=_indexed(scope, wide))
        await session.rollback()
    matched = {row.id: row.matched for row in pack.rows}
    assert matched[all_three] == ["zebra", "deploy", "pipelin"]
    assert matched[tied] == ["walrus", "yak", "pipelin"]


async def test_a_wake_packs_matched_lexemes_come_rarest_first(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    """The wake statement scores a goal with the same BM25 and returns each picked row's
    matched lexemes rarest first, ties by lexeme (``matched_by_idf`` on the picked rows)."""
    all_three, tied = await _seed_lexeme_rarities(seed)
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    async with app.state.ctx.sessionmaker() as session:
        result = await select_wake(
            session,
            None,  # type: ignore[arg-type]  # lexical retrieval embeds nothing
            app.state.ctx.settings,
            scope,
            namespace="alice",
            goal_query="zebra yak walrus deploy pipeline",
            retrieval="lexical",
            limit=20,
        )
        await session.rollback()
    matched = {row.id: row.matched for row in result.selection.rows}
    assert matched[all_three] == ["zebra", "deploy", "pipelin"]
    assert matched[tied] == ["walrus", "yak", "pipelin"]


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_a_wide_scopes_candidates_are_not_read_again(app: FastAPI, mode: str) -> None:
    """A wide pack's candidates carry their columns and cosine from the branch that found
    them (``vec``, ``hits``): ``scored`` reads no memory by its key; only the ranked few are
    (the same values: ``test_index_path_matches_exact_path``)."""
    scope = Scope(org_id=uuid.uuid4(), namespaces=["alice", "alice:s1"])
    now = datetime.now(UTC)
    plan = dataclasses.replace(_plan(app, GOAL, mode=mode), date_starts=[now], date_ends=[now])
    for literal in (False, True):
        sql = build_pack_sql(scope, plan, narrow=False, literal_scope=literal)
        scored = sql[sql.index("scored AS (") : sql.index("gated AS (")]
        assert "memories" not in scored
        assert ("vec v" in scored) == (mode != "lexical")
        assert ("hits h" in scored) == (mode != "vector")
        assert "valid_at" in scored
        narrow = build_pack_sql(scope, plan, narrow=True)
        assert "JOIN scoped m" in narrow[narrow.index("scored AS (") : narrow.index("gated AS (")]


def test_without_an_iterative_scan_the_search_is_as_wide_as_a_branch_returns() -> None:
    """pgvector older than 0.8 returns at most ``ef_search`` rows from a search: the
    settings' statement then takes the width of the rows a branch returns (``ef_rows``),
    and its own width on 0.8 and later (``ef``)."""
    sql, params = index_settings(40, None, custom_plans=False, rows=48)
    assert (params["ef"], params["ef_rows"]) == ("40", "48")
    assert "THEN :ef ELSE :ef_rows END" in sql
    assert index_settings(200, None, custom_plans=False, rows=96)[1]["ef_rows"] == "200"
