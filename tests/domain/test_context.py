"""domain/context.py: context packs as POST /v1/context answers them (the faces translate, the
domain compiles): scope, the relevance gate, facets, layers, the markdown budget, related
memories and the audit row (real Postgres, fake embedder). What the route itself answers
(validation, refusals) is tests/api/test_context.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from service.domain.facets import WAKE_FACETS, facet_of
from service.store.models import AuditEvent
from tests.conftest import BASE_TIME, Key, KeyFactory, Seeder

DEPLOY = "blue green deploy pipeline: switch traffic only after the health checks pass"
GOAL = "Fix the blue green deploy pipeline health checks"


async def pack(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    body.setdefault("namespace", "alice")
    response = await client.post("/v1/context", json=body, headers=key.headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def ids_of(result: dict[str, Any]) -> list[uuid.UUID]:
    return [uuid.UUID(i["id"]) for s in result["sections"] for i in s["items"]]


def items_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for s in result["sections"] for i in s["items"]]


# --- scope ------------------------------------------------------------------------------


async def test_task_sees_itself_and_ancestors_never_siblings_or_other_orgs(
    client: httpx.AsyncClient,
    key: Key,
    make_key: KeyFactory,
    seed: Seeder,
    seeder_for: Callable[[Key], Seeder],
) -> None:
    visible = {
        ns: await seed.add(f"{DEPLOY} (noted in {ns})", namespace=ns)
        for ns in ("alice", "alice:s1", "alice:s1:t1")
    }
    hidden = [
        await seed.add(f"{DEPLOY} (noted in {ns})", namespace=ns)
        for ns in ("alice:s1:t2", "alice:s2", "alice:s2:t1", "bob", "alicex")
    ]
    other = await make_key()
    foreign = await seeder_for(other).add(f"{DEPLOY} (other org)", namespace="alice:s1:t1")

    result = await pack(client, key, goal=GOAL, namespace="alice:s1:t1")
    got = set(ids_of(result))
    assert got == set(visible.values())
    assert not got & {*hidden, foreign}
    assert {i["namespace"] for i in items_of(result)} == {"alice", "alice:s1", "alice:s1:t1"}

    session = await pack(client, key, goal=GOAL, namespace="alice:s1")
    assert set(ids_of(session)) == {visible["alice"], visible["alice:s1"]}


async def test_project_filter_and_key_projects(
    client: httpx.AsyncClient, make_key: KeyFactory, app: FastAPI
) -> None:
    admin = await make_key()
    seed = Seeder(app, admin.org_id)
    none_id = await seed.add(f"{DEPLOY} for every project")
    p1 = await seed.add(f"{DEPLOY} in project p1", project="p1")
    p2 = await seed.add(f"{DEPLOY} in project p2", project="p2")

    assert set(ids_of(await pack(client, admin, goal=GOAL))) == {none_id, p1, p2}
    assert set(ids_of(await pack(client, admin, goal=GOAL, project="p1"))) == {none_id, p1}

    limited = await make_key(org=admin.org, scopes=["read"], projects=["p2"])
    assert set(ids_of(await pack(client, limited, goal=GOAL))) == {none_id, p2}
    assert set(ids_of(await pack(client, limited, goal=GOAL, project="p2"))) == {none_id, p2}

    denied = await client.post(
        "/v1/context",
        json={"goal": GOAL, "namespace": "alice", "project": "p1"},
        headers=limited.headers,
    )
    assert denied.status_code == 403
    assert denied.json()["error"]["message"] == "Project access denied: p1"


async def test_agent_diaries_only_for_their_agent(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    shared = await seed.add(f"{DEPLOY}, shared")
    mine = await seed.add(f"{DEPLOY}, in the runner's diary", agent_id="runner")
    theirs = await seed.add(f"{DEPLOY}, in the reviewer's diary", agent_id="reviewer")

    assert set(ids_of(await pack(client, key, goal=GOAL))) == {shared}
    got = set(ids_of(await pack(client, key, goal=GOAL, agent_id="runner")))
    assert got == {shared, mine}
    assert theirs not in got


async def test_key_prefix_hides_ancestors_above_it(
    client: httpx.AsyncClient, make_key: KeyFactory, app: FastAPI
) -> None:
    narrow = await make_key(namespaces=["alice:s1"])
    seed = Seeder(app, narrow.org_id)
    await seed.add(f"{DEPLOY} (user level)", namespace="alice")
    session = await seed.add(f"{DEPLOY} (session level)", namespace="alice:s1")
    result = await pack(client, narrow, goal=GOAL, namespace="alice:s1:t1")
    assert ids_of(result) == [session]


# --- validation -------------------------------------------------------------------------


async def test_limit_is_clamped(client: httpx.AsyncClient, key: Key, seed: Seeder) -> None:
    for n in range(3):
        await seed.add(f"{DEPLOY}, variant {n}")
    assert (await pack(client, key, goal=GOAL, limit=0))["total_items"] == 1
    assert (await pack(client, key, goal=GOAL, limit=-5))["total_items"] == 1
    assert (await pack(client, key, goal=GOAL, limit=999))["total_items"] == 3


# --- the relevance gate -----------------------------------------------------------------


async def test_unrelated_goal_gives_an_empty_pack(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await seed.add(DEPLOY)
    await seed.add("Rotate refresh tokens on every use and revoke the token family on reuse.")
    await seed.add("The staging database snapshots nightly at two in the morning.")
    result = await pack(client, key, goal="Bake sourdough bread with a rye starter")
    assert result["total_items"] == 0
    assert result["sections"] == []
    assert result["gated_out"] >= 1
    assert "Nothing relevant" in result["usage_hint"]
    assert "relevance floor" in result["usage_hint"]
    assert "No stored memory is relevant" in result["markdown"]


async def test_gate_keeps_the_relevant_and_drops_the_rest(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    relevant = await seed.add(DEPLOY)
    await seed.add("Bananas are rich in potassium and taste sweet when ripe.", type="domain")
    result = await pack(client, key, goal=GOAL)
    assert ids_of(result) == [relevant]
    assert result["gated_out"] == 1
    item = items_of(result)[0]
    assert "matched goal terms" in item["reason"]
    assert "semantic" in item["reason"]


async def test_empty_namespace_is_an_empty_pack(client: httpx.AsyncClient, key: Key) -> None:
    result = await pack(client, key, goal=GOAL, namespace="nobody")
    assert result["total_items"] == 0
    assert result["gated_out"] == 0
    assert "no memory in this scope" in result["usage_hint"]


# --- facets and intents -----------------------------------------------------------------


async def _mixed(seed: Seeder) -> dict[str, uuid.UUID]:
    kinds = {
        "decision": "We decided the deploy pipeline health checks gate the blue green switch.",
        "gotcha": "Gotcha: the deploy pipeline health checks time out on cold blue green pools.",
        "plan": "Plan: migrate the blue green deploy pipeline health checks next sprint.",
        "task": "Task: fix the flaky health checks in the blue green deploy pipeline.",
        "verification": "Verify the blue green deploy pipeline by running the health checks twice.",
        "idea": "Idea: canary instead of blue green for the deploy pipeline health checks.",
        "episode": "Yesterday the blue green deploy pipeline health checks failed twice.",
    }
    return {t: await seed.add(text, type=t) for t, text in kinds.items()}


@pytest.mark.parametrize(
    ("intent", "first"),
    [
        ("debug", ["gotchas", "verification", "procedures", "recent_memory"]),
        ("plan", ["planning", "decisions", "constraints"]),
        (
            "build",
            ["active_work", "decisions", "constraints", "procedures", "gotchas", "artifacts"],
        ),
        ("ideate", ["ideation", "domain"]),
        ("decide", ["decisions", "constraints", "ideation"]),
    ],
)
async def test_intent_puts_its_facets_first(
    client: httpx.AsyncClient, key: Key, seed: Seeder, intent: str, first: list[str]
) -> None:
    await _mixed(seed)
    result = await pack(client, key, goal=GOAL, intent=intent)
    facets = [s["facet"] for s in result["sections"]]
    assert len(facets) == 7 or len(facets) == len(set(facets))
    expected = [f for f in first if f in facets]
    assert facets[: len(expected)] == expected
    for section in result["sections"]:
        scores = [i["score"] for i in section["items"]]
        assert scores == sorted(scores, reverse=True)
        assert all(i["facet"] == section["facet"] for i in section["items"])
    lead = result["sections"][0]["items"][0]
    assert f"prioritised for {intent} intent" in lead["reason"]


async def test_general_intent_orders_sections_by_score(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await _mixed(seed)
    result = await pack(client, key, goal=GOAL, intent="general")
    best = [s["items"][0]["score"] for s in result["sections"]]
    assert best == sorted(best, reverse=True)
    assert all("prioritised" not in i["reason"] for i in items_of(result))


async def test_intent_prior_lifts_its_types_in_the_ranking(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    text = "blue green deploy pipeline health checks need a warm pool"
    gotcha = await seed.add(text, type="gotcha", name="warm pool")
    idea = await seed.add(text + ".", type="idea", name="warm pool")
    debug = await pack(client, key, goal=GOAL, intent="debug", limit=1)
    ideate = await pack(client, key, goal=GOAL, intent="ideate", limit=1)
    assert ids_of(debug) == [gotcha]
    assert ids_of(ideate) == [idea]


# --- layers -----------------------------------------------------------------------------


async def test_wake_honours_limit_fixed_order_and_byte_stable(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    for n in range(6):
        await seed.add(f"{DEPLOY}, decision {n}", type="decision")
        await seed.add(f"{DEPLOY}, gotcha {n}", type="gotcha")
    await seed.add(f"{DEPLOY}, a plan", type="plan")
    idea = await seed.add(f"{DEPLOY}, an idea", type="idea")
    body = {"goal": GOAL, "layer": "wake", "limit": 20}
    first = await pack(client, key, **body)
    second = await pack(client, key, **body)
    assert first["total_items"] == 13  # every decision, gotcha and the plan; never the idea
    assert str(idea) not in str(first)
    assert first["markdown"] == second["markdown"]
    assert first["sections"] == second["sections"]
    facets = [s["facet"] for s in first["sections"]]
    assert set(facets) <= set(WAKE_FACETS)
    assert facets == [f for f in WAKE_FACETS if f in facets]
    for section in first["sections"]:
        assert all(i["related"] == [] for i in section["items"])
    assert (await pack(client, key, goal=GOAL, layer="wake"))["total_items"] == 8


async def test_wake_ignores_recency_in_scores(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    old = BASE_TIME - timedelta(days=400)
    await seed.add(DEPLOY, type="decision", created_at=old)
    wake = items_of(await pack(client, key, goal=GOAL, layer="wake", intent="general"))[0]
    recall = items_of(await pack(client, key, goal=GOAL, layer="recall", intent="general"))[0]
    assert wake["score"] == pytest.approx(recall["score"], abs=1e-4)


async def test_layer_default_limits(client: httpx.AsyncClient, key: Key, seed: Seeder) -> None:
    for n in range(30):
        await seed.add(f"{DEPLOY}, note {n}", type="episode")
    assert (await pack(client, key, goal=GOAL))["total_items"] == 24
    assert (await pack(client, key, goal=GOAL, layer="wake"))["total_items"] == 8
    assert (await pack(client, key, goal=GOAL, layer="deep_search"))["total_items"] == 30


# --- markdown ---------------------------------------------------------------------------


async def test_markdown_stays_within_a_tiny_budget(
    client: httpx.AsyncClient, key: Key, seed: Seeder, app: FastAPI
) -> None:
    for n in range(10):
        await seed.add(f"{DEPLOY}, detail number {n} with a few more words to take room")
    count = app.state.ctx.embedder.count_tokens
    full = await pack(client, key, goal=GOAL)
    assert full["markdown_tokens"] == count(full["markdown"])
    for budget in (1, 5, 30, 60, 120, 250):
        result = await pack(client, key, goal=GOAL, markdown_token_budget=budget)
        assert result["total_items"] == 10  # sections keep everything
        assert count(result["markdown"]) <= budget if result["markdown"] else True
        assert result["markdown_tokens"] <= budget
    mid = await pack(client, key, goal=GOAL, markdown_token_budget=120)
    assert "left out to fit the token budget" in mid["markdown"]
    assert "did not fit the markdown budget" in mid["usage_hint"]


async def test_markdown_drops_the_lowest_ranked_first(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    for n in range(6):
        await seed.add(f"{DEPLOY}, detail number {n}")
    full = await pack(client, key, goal=GOAL, intent="general")
    ranked = sorted(items_of(full), key=lambda i: -i["score"])
    cut = await pack(client, key, goal=GOAL, intent="general", markdown_token_budget=110)
    shown = [i for i in ranked if i["content"] in cut["markdown"]]
    assert 0 < len(shown) < len(ranked)
    assert shown == ranked[: len(shown)]


async def test_a_huge_item_is_cut_not_dropped(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await seed.add(f"{DEPLOY}. " + "More context about the pipeline. " * 300)
    result = await pack(client, key, goal=GOAL, markdown_token_budget=100)
    assert result["markdown_tokens"] <= 100
    assert "blue green deploy pipeline" in result["markdown"]
    assert "…" in result["markdown"]


# --- related memories, the graph step, superseded -----------------------------------------


async def test_related_items_listed_in_scope_only(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    anchor = await seed.add(DEPLOY)
    dep = await seed.add("Load balancer target groups drain for thirty seconds.", type="constraint")
    sibling = await seed.add("Secret from a sibling task.", namespace="alice:s1:t2")
    await seed.relate(anchor, dep, "depends_on")
    await seed.relate(sibling, anchor, "derived_from")
    result = await pack(client, key, goal=GOAL, namespace="alice:s1:t1")
    item = next(i for i in items_of(result) if i["id"] == str(anchor))
    assert item["related"] == [
        {
            "id": str(dep),
            "type": "constraint",
            "name": "Load balancer target groups drain for thirty seconds",
            "relationship": "depends_on",
            "direction": "outgoing",
            "distance": 1,
        }
    ]
    assert str(sibling) not in str(result)

    none = await pack(client, key, goal=GOAL, namespace="alice:s1:t1", include_related=False)
    assert all(i["related"] == [] for i in items_of(none))


async def test_related_limit_and_incoming_direction(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    anchor = await seed.add(DEPLOY)
    for n in range(5):
        other = await seed.add(f"Unrelated runbook step {n} about log rotation.", type="procedure")
        await seed.relate(other, anchor, "refines")
    item = items_of(await pack(client, key, goal=GOAL, related_limit=2))[0]
    assert len(item["related"]) == 2
    assert {r["direction"] for r in item["related"]} == {"incoming"}


async def test_deep_search_pulls_in_neighbours_with_a_reason(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    anchor = await seed.add(DEPLOY)
    dep = await seed.add("Load balancer target groups drain for thirty seconds.", type="constraint")
    await seed.relate(anchor, dep, "depends_on")
    recall = await pack(client, key, goal=GOAL)
    assert ids_of(recall) == [anchor]
    deep = await pack(client, key, goal=GOAL, layer="deep_search")
    assert set(ids_of(deep)) == {anchor, dep}
    pulled = next(i for i in items_of(deep) if i["id"] == str(dep))
    assert pulled["reason"] == f"related to {anchor} via depends_on"
    assert pulled["score"] < next(i for i in items_of(deep) if i["id"] == str(anchor))["score"]
    wake = await pack(client, key, goal=GOAL, layer="wake")
    assert all(i["reason"].find("related to") < 0 for i in items_of(wake))  # no graph step
    assert all(i["related"] == [] for i in items_of(wake))


async def test_superseded_excluded_unless_asked(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    new = await seed.add(f"{DEPLOY}, current rule")
    old = await seed.add(f"{DEPLOY}, old rule", superseded_by=new)
    assert ids_of(await pack(client, key, goal=GOAL)) == [new]
    both = await pack(client, key, goal=GOAL, include_superseded=True)
    assert set(ids_of(both)) == {new, old}


# --- response and audit -----------------------------------------------------------------


async def test_item_shape_and_quality(client: httpx.AsyncClient, key: Key, seed: Seeder) -> None:
    memory_id = await seed.add(
        DEPLOY, type="gotcha", project="p1", source="incident-42", metadata={"severity": "high"}
    )
    result = await pack(client, key, goal=GOAL, project="p1", intent="debug", domain="ops")
    assert result["query"] == f"{GOAL} ops"
    assert (result["goal"], result["intent"], result["layer"]) == (GOAL, "debug", "recall")
    assert (result["domain"], result["project"], result["retrieval"]) == ("ops", "p1", "hybrid")
    item = items_of(result)[0]
    assert item["id"] == str(memory_id)
    assert item["facet"] == facet_of("gotcha") == "gotchas"
    assert item["source"] == "incident-42"
    assert item["metadata"] == {"severity": "high"}
    assert item["quality"]["project_id"] == "p1"
    assert item["quality"]["source"] == "incident-42"
    assert item["quality"]["created_at"].startswith("2026-01-01")
    assert 0 < item["score"]
    assert "gotcha prioritised for debug intent" in item["reason"]


async def test_every_call_writes_one_audit_row_without_content(
    client: httpx.AsyncClient, key: Key, seed: Seeder, app: FastAPI
) -> None:
    memory_id = await seed.add(DEPLOY)
    result = await pack(client, key, goal=GOAL + " password=hunter2secret")
    async with app.state.ctx.sessionmaker() as session:
        rows = (
            (
                await session.execute(
                    select(AuditEvent).where(
                        AuditEvent.org_id == key.org_id, AuditEvent.action == "context"
                    )
                )
            )
            .scalars()
            .all()
        )
    assert len(rows) == 1
    row = rows[0]
    assert str(row.id) == result["audit_id"]
    assert row.memory_ids == [memory_id]
    assert row.outcome == "ok"
    assert row.namespace == "alice"
    assert row.latency_ms > 0
    assert row.details["items"] == [
        {"id": str(memory_id), "score": items_of(result)[0]["score"], "facet": "decisions"}
    ]
    assert row.details["gated_out"] == result["gated_out"]
    assert row.details["markdown_tokens"] == result["markdown_tokens"]
    assert row.request["intent"] == "build"
    assert "hunter2secret" not in str(row.request)
    assert "switch traffic" not in str(row.details) + str(row.request)


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
async def test_retrieval_modes(
    client: httpx.AsyncClient, key: Key, seed: Seeder, mode: str
) -> None:
    relevant = await seed.add(DEPLOY)
    await seed.add("Bananas are rich in potassium and taste sweet when ripe.", type="domain")
    result = await pack(client, key, goal=GOAL, retrieval=mode)
    assert result["retrieval"] == mode
    assert ids_of(result) == [relevant]
    reason = items_of(result)[0]["reason"]
    assert ("semantic" in reason) == (mode != "lexical")
    assert ("matched goal terms" in reason) == (mode != "vector")


@pytest.mark.parametrize(
    "goal",
    ["'; DROP TABLE memories; --", "a & | ! :* ( ) <->", "the of and", "日本語のメモ", "!"],
)
async def test_odd_goals_are_harmless(
    client: httpx.AsyncClient, key: Key, seed: Seeder, goal: str
) -> None:
    await seed.add(DEPLOY)
    response = await client.post(
        "/v1/context", json={"goal": goal, "namespace": "alice"}, headers=key.headers
    )
    assert response.status_code == 200, response.text


async def test_a_dialogue_goal_is_answered_about_its_last_turns(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    """The chat talked long about the kitchen and ends on the puppy: the pack is about the
    puppy (domain/goal_focus.py), not about the bag of every word said."""
    puppy = await seed.add("Biscuit the puppy is settling in at home", type="episode")
    kitchen = await seed.add(
        "We repainted the kitchen walls sage green, new cabinets, tiles and a brass faucet",
        type="episode",
    )
    older = [
        "Sam: the kitchen walls look great in sage green",
        "Leo: thanks, the cabinets and the tiles took ages",
        "Sam: and the brass faucet? kitchen cabinets tiles walls",
        "Leo: yes, all good",
    ]
    goal = "\n".join([*older, "Sam: and is Biscuit the puppy settling in at home?"])
    result = await pack(client, key, goal=goal, layer="recall")
    assert ids_of(result)[0] == puppy
    whole = await pack(client, key, goal=" ".join(goal.splitlines()), layer="recall")
    assert ids_of(whole)[0] == kitchen  # the same words as one line: a bag of them
