"""The ranking statement's two plans give the same pack: the exact scan of a narrow scope and
the index path (HNSW with iterative scan, GIN AND btree) of a wide one, scope included."""

from __future__ import annotations

import dataclasses

import pytest
from fastapi import FastAPI

from service.domain import ranking
from service.embedding.fake import FakeEmbedder
from service.store.retrieval import RetrievalRepository, Scope
from tests.conftest import Key
from tests.context.conftest import Seeder

GOAL = "Fix the blue green deploy pipeline health checks"


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
    settings = app.state.ctx.settings
    plan = ranking.build_plan(
        ranking.PlanInputs(
            mode=mode,  # type: ignore[arg-type]
            layer="deep_search",
            intent="general",
            query=GOAL,
            query_vector=FakeEmbedder().embed_query(GOAL),
            limit=50,
            domain=None,
            include_related=True,
            related_limit=3,
        ),
        settings,
    )
    results = []
    for exact_max in (10_000, 0):
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            pack = await repo.rank(
                scope, dataclasses.replace(plan, exact_scan_max_rows=exact_max), size
            )
            results.append(pack)
            await session.rollback()
    exact, indexed = results
    assert {r.id for r in exact.rows} == expected
    assert [r.id for r in indexed.rows] == [r.id for r in exact.rows]
    assert [round(r.score, 6) for r in indexed.rows] == [round(r.score, 6) for r in exact.rows]
    assert indexed.gated_out == exact.gated_out


@pytest.mark.parametrize("exact_max", [10_000, 0])
async def test_the_relative_gate_drops_candidates_far_below_the_best(
    app: FastAPI, key: Key, seed: Seeder, exact_max: int
) -> None:
    best = await seed.add(GOAL)
    weak = await seed.add("blue green deploy notes from the offsite, unrelated otherwise")
    scope = Scope(org_id=key.org_id, namespaces=["alice"])
    plan = ranking.build_plan(
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
    packs = []
    for share in (0.0, 0.95):
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            size = await repo.scope_size(scope, 10_001)
            packs.append(
                await repo.rank(
                    scope,
                    dataclasses.replace(plan, relative_gate=share, exact_scan_max_rows=exact_max),
                    size,
                )
            )
            await session.rollback()
    opened, gated = packs
    assert [r.id for r in opened.rows] == [best, weak]
    assert [r.id for r in gated.rows] == [best]
    assert gated.gated_out == opened.gated_out + 1


@pytest.mark.parametrize("exact_max", [10_000, 0])
async def test_a_memory_dated_in_the_goals_period_is_boosted(
    app: FastAPI, key: Key, seed: Seeder, exact_max: int
) -> None:
    from datetime import UTC, datetime

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
    plan = ranking.build_plan(
        ranking.PlanInputs(
            mode="hybrid",
            layer="recall",
            intent="general",
            query=goal,
            query_vector=FakeEmbedder().embed_query(goal),
            limit=10,
            domain=None,
            include_related=False,
            related_limit=0,
        ),
        app.state.ctx.settings,
    )
    periods = goal_periods(goal)
    boosted = dataclasses.replace(
        plan,
        date_starts=[p.start for p in periods],
        date_ends=[p.end for p in periods],
        date_boost=0.5,
        exact_scan_max_rows=exact_max,
    )
    packs = []
    for p in (dataclasses.replace(plan, exact_scan_max_rows=exact_max), boosted):
        async with app.state.ctx.sessionmaker() as session:
            repo = RetrievalRepository(session)
            packs.append(await repo.rank(scope, p, await repo.scope_size(scope, 10_001)))
            await session.rollback()
    plain, with_dates = packs
    before = {r.id: r.score for r in plain.rows}
    after = {r.id: r.score for r in with_dates.rows}
    assert set(before) == set(after) == {undated, dated, other}
    assert after[dated] == pytest.approx(before[dated] * 1.5)
    assert after[undated] == pytest.approx(before[undated])
    assert after[other] == pytest.approx(before[other])
    assert with_dates.rows[0].id == dated
