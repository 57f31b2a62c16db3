"""Wake packs over HTTP (domain/wake.py): goal optional, never gated into emptiness, per-facet
quotas over the namespace chain, a goal re-ranking within them, byte-stable output, limits,
and the usage hints of the empty cases (real Postgres, fake embedder)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from service.domain.facets import WAKE_FACETS
from tests.conftest import BASE_TIME, Key, KeyFactory, Seeder


async def wake(client: httpx.AsyncClient, key: Key, **body: Any) -> dict[str, Any]:
    body.setdefault("namespace", "alice")
    body["layer"] = "wake"
    response = await client.post("/v1/context", json=body, headers=key.headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def names(result: dict[str, Any]) -> list[str]:
    return [i["name"] for s in result["sections"] for i in s["items"]]


def facets(result: dict[str, Any]) -> dict[str, list[str]]:
    return {s["facet"]: [i["name"] for i in s["items"]] for s in result["sections"]}


async def issue_store(seed: Seeder) -> dict[str, Any]:
    """The store of issue 14: 12 memories for acme and acme:auth (an active task, decisions,
    a constraint, gotchas, a verification and a user preference)."""
    ids = {}
    rows = [
        ("acme", "episode", "pref", "Prefers short answers, code first, no preamble."),
        ("acme", "gotcha", "pytest", "pytest session fixtures leak state between test modules."),
        ("acme", "decision", "monorepo", "All services live in one monorepo built with uv."),
        ("acme:auth", "decision", "rs256", "Sign auth tokens with RS256 instead of HS256."),
        ("acme:auth", "decision", "jwks", "Publish the auth public keys on a JWKS endpoint."),
        ("acme:auth", "constraint", "no-logs", "Never log raw tokens, not even truncated."),
        ("acme:auth", "gotcha", "clock", "Token validation fails when the clock skew is 30s."),
        ("acme:auth", "gotcha", "cache", "The JWKS cache keeps stale keys for ten minutes."),
        ("acme:auth", "verification", "verify", "Token tests pass against the new key pair."),
        ("acme:auth", "episode", "yesterday", "Rotated the staging signing key by hand."),
        ("acme:auth:t1", "task", "task", "Migrate token signing to RS256; half the services done."),
        ("acme:auth", "idea", "idea", "Maybe move sessions to paseto tokens one day."),
    ]
    for namespace, type_, name, content in rows:
        ids[name] = await seed.add(content, namespace=namespace, type=type_, name=name)
    return ids


# --- the issue's scenario -----------------------------------------------------------------


async def test_issue_scenario_generic_goals_wake_the_agent(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await issue_store(seed)
    resume = await wake(client, key, goal="resume work", namespace="acme:auth:t1")
    assert resume["total_items"] == 8
    assert resume["gated_out"] == 0
    got = facets(resume)
    assert got["active_work"] == ["task"]
    assert "no-logs" in got["constraints"]
    assert {"rs256", "jwks"} & set(got["decisions"])
    assert got["preferences"] == ["pref"]
    assert "idea" not in names(resume)

    session = await wake(client, key, goal="start of session", namespace="acme:auth")
    got = facets(session)
    assert session["total_items"] == 8
    assert "active_work" not in got  # the task lives in acme:auth:t1, below this call
    assert {"rs256", "jwks"} <= set(got["decisions"]) | {"monorepo"}
    assert "no-logs" in got["constraints"]
    assert "pref" in got["preferences"]

    none = await wake(client, key, namespace="acme:auth:t1")
    assert none["goal"] is None
    assert none["markdown"].startswith("# Wake pack: where things stand\n")
    assert names(none) and facets(none)["active_work"] == ["task"]


# --- goal optional --------------------------------------------------------------------------


async def test_goal_optional_for_wake_only(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await issue_store(seed)
    no_goal = await wake(client, key, namespace="acme:auth:t1")
    blank = await wake(client, key, goal="   ", namespace="acme:auth:t1")
    assert no_goal["sections"] == blank["sections"]
    assert blank["goal"] is None
    for body in ({"namespace": "acme"}, {"namespace": "acme", "layer": "deep_search"}):
        response = await client.post("/v1/context", json=body, headers=key.headers)
        assert response.status_code == 422
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("validation_error", "goal")
        assert "unless layer is `wake`" in error["message"]
    response = await client.post(
        "/v1/context", json={"namespace": "acme", "goal": " "}, headers=key.headers
    )
    assert response.json()["error"]["field"] == "goal"


# --- quotas and ordering --------------------------------------------------------------------


async def test_quotas_keep_every_facet_in_the_pack(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    for n in range(12):
        await seed.add(f"Decision number {n} about the billing schema.", type="decision")
    await seed.add("Finish the billing export.", type="task", namespace="alice:s1:t1")
    await seed.add("Exports must stay under 1 GB.", type="constraint", namespace="alice:s1")
    await seed.add("The export job times out on Mondays.", type="gotcha")
    await seed.add("Likes tables over prose.", type="claim")
    await seed.add("Ran the export against staging.", type="episode", namespace="alice:s1")
    result = await wake(client, key, namespace="alice:s1:t1")
    got = facets(result)
    assert list(got) == [f for f in WAKE_FACETS if f in got]
    assert set(got) == {
        "active_work",
        "constraints",
        "decisions",
        "gotchas",
        "preferences",
        "recent_memory",
    }
    assert len(got["decisions"]) == 3  # the slots the other facets could not use
    assert got["decisions"] == [
        "Decision number 11 about the billing schema",
        "Decision number 10 about the billing schema",
        "Decision number 9 about the billing schema",
    ]  # newest first, by stored timestamps


async def test_type_priority_then_recency_then_closeness(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    when = BASE_TIME + timedelta(days=10)
    await seed.add("A plan written last.", type="plan", name="plan", namespace="alice:s1")
    await seed.add("An older task.", type="task", name="old task", created_at=BASE_TIME)
    for namespace in ("alice", "alice:s1", "alice:s1:t1"):
        await seed.add(
            f"Same-time gotcha in {namespace}.",
            type="gotcha",
            name=namespace,
            namespace=namespace,
            created_at=when,
        )
    result = await wake(client, key, namespace="alice:s1:t1", limit=10)
    got = facets(result)
    assert got["active_work"] == ["old task", "plan"]  # tasks before plans
    assert got["gotchas"] == ["alice:s1:t1", "alice:s1", "alice"]  # task, session, user


async def test_finished_superseded_and_foreign_memories_stay_out(
    client: httpx.AsyncClient,
    key: Key,
    seed: Seeder,
    make_key: KeyFactory,
    seeder_for: Any,
) -> None:
    live = await seed.add("Open task: add the audit export.", type="task", name="open")
    await seed.add("Done: the audit schema.", type="task", name="done", metadata={"status": "Done"})
    new = await seed.add("Use zstd for exports.", type="decision", name="new")
    await seed.add("Use gzip for exports.", type="decision", name="old", superseded_by=new)
    await seed.add("Sibling task note.", type="gotcha", name="sibling", namespace="alice:s1:t2")
    await seed.add("Another user.", type="gotcha", name="bob", namespace="bob")
    other = await make_key()
    await seeder_for(other).add("Other org.", type="gotcha", name="foreign", namespace="alice")
    result = await wake(client, key, namespace="alice:s1:t1")
    assert set(names(result)) == {"open", "new"}
    assert str(live) in str(result)
    assert result["total_items"] == 2


async def test_key_namespace_prefixes_bound_the_chain(
    client: httpx.AsyncClient, make_key: KeyFactory, seed: Seeder, key: Key
) -> None:
    await seed.add("User-level decision.", type="decision", name="user")
    await seed.add("Session decision.", type="decision", name="session", namespace="alice:s1")
    assert names(await wake(client, key, namespace="alice:s1")) == ["session", "user"]
    limited = await make_key(org=key.org, namespaces=["alice:s1"])
    assert names(await wake(client, limited, namespace="alice:s1")) == ["session"]


# --- the goal -------------------------------------------------------------------------------


async def test_specific_goal_reranks_within_quotas_and_never_empties(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await seed.add("Sign tokens with RS256 keys from the vault.", type="decision", name="rs256")
    for n in range(8):
        await seed.add(f"Decision {n} on the dashboard colours.", type="decision", name=f"d{n}")
    for n in range(3):
        await seed.add(f"Gotcha {n} in the CSV importer.", type="gotcha", name=f"g{n}")
    await seed.add("Ship the dashboard.", type="task", name="task")
    default = await wake(client, key, limit=4)
    specific = await wake(client, key, limit=4, goal="resume the RS256 token signing migration")
    assert "rs256" not in names(default)
    assert facets(specific)["decisions"][0] == "rs256"
    assert [s["facet"] for s in specific["sections"]] == [s["facet"] for s in default["sections"]]
    assert [len(s["items"]) for s in specific["sections"]] == [
        len(s["items"]) for s in default["sections"]
    ]
    pulled = next(i for s in specific["sections"] for i in s["items"] if i["name"] == "rs256")
    assert "pulled forward by the goal" in pulled["reason"]
    assert pulled["score"] > 0
    assert "matched 1 item" in specific["usage_hint"]
    unrelated = await wake(client, key, limit=4, goal="bake sourdough bread at home")
    assert unrelated["sections"] == default["sections"]
    assert unrelated["total_items"] == 4
    assert "matched nothing specific" in unrelated["usage_hint"]


async def test_a_goal_matching_most_of_the_scope_is_generic(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    for n in range(6):
        await seed.add(f"Billing export decision {n}.", type="decision", name=f"d{n}")
    default = await wake(client, key, limit=3)
    broad = await wake(client, key, limit=3, goal="billing export decision")
    assert names(broad) == names(default)
    assert "taken as generic" in broad["usage_hint"], broad["usage_hint"]


# --- byte-stable ------------------------------------------------------------------------------


@pytest.mark.parametrize("goal", [None, "resume work", "resume the RS256 migration"])
async def test_same_store_same_call_same_bytes(
    client: httpx.AsyncClient, key: Key, seed: Seeder, goal: str | None
) -> None:
    await issue_store(seed)
    body: dict[str, Any] = {} if goal is None else {"goal": goal}
    first = await wake(client, key, namespace="acme:auth:t1", **body)
    again = await wake(client, key, namespace="acme:auth:t1", **body)
    assert first["markdown"].encode() == again["markdown"].encode()
    assert first["sections"] == again["sections"]
    assert first["usage_hint"] == again["usage_hint"]


async def test_recent_is_by_stored_timestamps(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    # Inserted newest first: the order follows created_at, not insertion or the clock.
    for n in (3, 1, 2):
        await seed.add(
            f"Worked on step {n}.",
            type="episode",
            name=f"step {n}",
            namespace="alice:s1",
            created_at=BASE_TIME + timedelta(days=n),
        )
    result = await wake(client, key, namespace="alice:s1")
    assert facets(result)["recent_memory"] == ["step 3", "step 2", "step 1"]


# --- limit, empty cases, plurals, trimming ------------------------------------------------------


async def test_limit_default_and_bounds(client: httpx.AsyncClient, key: Key, seed: Seeder) -> None:
    for n in range(60):
        await seed.add(f"Gotcha {n} of the importer.", type="gotcha")
    assert (await wake(client, key))["total_items"] == 8
    assert (await wake(client, key, limit=12))["total_items"] == 12
    assert (await wake(client, key, limit=500))["total_items"] == 50
    assert (await wake(client, key, limit=0))["total_items"] == 1


async def test_empty_only_when_empty_and_the_hint_says_which(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    nothing = await wake(client, key, namespace="zed")
    assert nothing["total_items"] == 0
    assert "nothing is stored yet" in nothing["usage_hint"]
    await seed.add("An idea for later.", type="idea", namespace="zed")
    await seed.add("Done task.", type="task", namespace="zed", metadata={"status": "done"})
    unqualified = await wake(client, key, namespace="zed", goal="resume work")
    assert unqualified["total_items"] == 0
    assert "2 memories in this namespace and its ancestors" in unqualified["usage_hint"]
    assert "none of them wake material" in unqualified["markdown"]
    await seed.add("Keep it simple.", type="rule", namespace="zed")
    one = await wake(client, key, namespace="zed", goal="resume work")
    assert one["total_items"] == 1
    assert "· 1 item\n" in one["markdown"]
    assert "1 item of the working set" in one["usage_hint"]


async def test_trimmed_items_are_counted_in_the_hint(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    for n in range(8):
        await seed.add(
            f"Gotcha number {n}: a long explanation of the importer's failure modes, "
            "with enough words to take room in the markdown budget.",
            type="gotcha",
            name=f"g{n}",
        )
    full = await wake(client, key)
    trimmed = await wake(client, key, markdown_token_budget=120)
    assert trimmed["total_items"] == 8
    assert "lower-ranked items did not fit the markdown budget" in trimmed["usage_hint"]
    shown = [n for n in names(full) if f"Gotcha number {n[1:]}:" in trimmed["markdown"]]
    assert shown == names(full)[: len(shown)]  # the last picked go first
    assert 0 < len(shown) < 8


async def test_lasting_preferences_before_user_level_events(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await seed.add("Wants SQL before Python.", type="claim", name="claim", created_at=BASE_TIME)
    await seed.add(
        "Talked about the travel budget.",
        type="episode",
        name="chat",
        created_at=BASE_TIME + timedelta(days=5),
    )
    await seed.add("Ran the loader.", type="episode", name="run", namespace="alice:s1")
    result = await wake(client, key, namespace="alice:s1", limit=2)
    assert facets(result) == {"preferences": ["claim"], "recent_memory": ["run"]}


async def test_the_audit_row_records_the_wake_selection(
    client: httpx.AsyncClient, key: Key, seed: Seeder
) -> None:
    await issue_store(seed)
    result = await wake(client, key, namespace="acme:auth:t1")
    rows = (
        await client.get(
            "/v1/audit", params={"action": "context", "full": "true"}, headers=key.headers
        )
    ).json()["items"]
    row = next(r for r in rows if r["id"] == result["audit_id"])
    assert row["request"]["goal"] is None
    assert row["request"]["layer"] == "wake"
    assert row["details"]["wake"]["qualified"] == 11
    assert row["details"]["scope_rows"] == 12
    assert row["details"]["total_items"] == 8
