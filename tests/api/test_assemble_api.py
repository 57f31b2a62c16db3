"""POST /v1/assemble over HTTP: the layers in order, one budget, the cut order, a valid
tool-call sequence, redaction of the parts never cut, and the audit rows."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import Key, KeyFactory, SqlRows

SECRET = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
MEMORY = (
    "Refresh tokens in the auth service must be rotated on every use; reuse of an old "
    "refresh token revokes the whole token family."
)
LOG = "\n".join(
    [f"2026-11-26 10:00:{i % 60:02d} INFO served request {i} in {i % 50} ms" for i in range(2000)]
    + ["FAILED tests/test_auth.py::test_refresh_rotation - AssertionError: family not revoked"]
)


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}
            for i in ids
        ],
    }


def result(call_id: str, body: Any, budget: int = 800, name: str = "run_tests") -> dict[str, Any]:
    return {"tool_call_id": call_id, "tool_name": name, "result": body, "budget_tokens": budget}


async def seed(client: httpx.AsyncClient, key: Key) -> str:
    stored = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "gotcha", "content": MEMORY},
        headers=key.headers,
    )
    assert stored.status_code == 201, stored.text
    artifact = await client.post(
        "/v1/artifacts",
        json={
            "namespace": "alice",
            "name": "test plan",
            "body": {"suite": "auth", "failing": ["test_refresh_rotation"], "owner": "dana"},
        },
        headers=key.headers,
    )
    assert artifact.status_code == 201, artifact.text
    return str(artifact.json()["artifact_id"])


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


async def test_every_layer_in_order_within_the_budget(
    client: httpx.AsyncClient, key: Key, sql: SqlRows
) -> None:
    artifact_id = await seed(client, key)
    response = await client.post(
        "/v1/assemble",
        json={
            "budget_tokens": 4000,
            "system": f"You fix failing tests. The CI token is {SECRET}",
            "user_message": f"Fix the refresh token rotation test. My token is {SECRET}",
            "memory": {
                "goal": "fix refresh token rotation in the auth service",
                "namespace": "alice:s1",
            },
            "task_state": [{"artifact_id": artifact_id, "fields": ["failing", "owner"]}],
            "messages": [
                {"role": "user", "content": "Earlier: what does the auth service do?"},
                {"role": "assistant", "content": "It issues tokens."},
                call("call_1"),
            ],
            "tool_results": [result("call_1", LOG, budget=300)],
        },
        headers=key.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert SECRET not in response.text
    assert roles(body) == [
        "system",
        "user",
        "assistant",
        "user",
        "system",
        "system",
        "assistant",
        "tool",
    ]
    messages = body["messages"]
    assert "[GITHUB_TOKEN:REDACTED]" in messages[3]["content"]
    assert (
        messages[0]["content"] == "You fix failing tests. The CI token is [GITHUB_TOKEN:REDACTED]"
    )
    assert "rotated on every use" in messages[4]["content"]
    assert "test_refresh_rotation" in messages[5]["content"] and "dana" in messages[5]["content"]
    assert messages[7]["tool_call_id"] == "call_1"
    assert "FAILED tests/test_auth.py::test_refresh_rotation" in messages[7]["content"]
    assert body["used_tokens"] <= 4000
    assert body["utilisation"] == round(body["used_tokens"] / 4000, 4)
    layers = {r["layer"]: r for r in body["layers"]}
    assert sum(r["tokens"] for r in layers.values()) == body["used_tokens"]
    assert {n: r["status"] for n, r in layers.items()} == {
        "system": "kept",
        "user": "kept",
        "history": "kept",
        "memory": "kept",
        "task_state": "kept",
        "tool_results": "kept",
    }
    assert body["cut_order"] == ["history", "memory", "task_state", "tool_results"]
    assert body["tool_results"][0]["tokens_after"] <= 300 < body["tool_results"][0]["tokens_before"]
    assert {"label": "GITHUB_TOKEN", "count": 2} in body["redactions"]
    rows = await sql(
        "SELECT id, action, details, request FROM audit_events WHERE org_id = :o ORDER BY created_at",
        o=key.org_id,
    )
    actions = [r.action for r in rows]
    assert actions[-3:] == ["artifact", "context", "assemble"] or actions[-3:] == [
        "context",
        "artifact",
        "assemble",
    ]
    row = rows[-1]
    assert row.details["tool_results"][0]["tool_name"] == "run_tests"
    assert row.details["redactions"] == {"GITHUB_TOKEN": 2}
    dumped = json.dumps(row.details) + json.dumps(row.request)
    assert SECRET not in dumped and "served request" not in dumped and "rotated" not in dumped
    assert all(r.details.get("part_of") == str(body["audit_id"]) for r in rows[-3:-1])
    [context_row] = [r for r in rows[-3:] if r.action == "context"]
    assert body["memory_audit_id"] == str(context_row.id)


async def test_over_budget_cuts_history_then_memory_then_task_state_then_trims_tools(
    client: httpx.AsyncClient, key: Key
) -> None:
    artifact_id = await seed(client, key)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"old turn {i} " + "words " * 60}
        for i in range(10)
    ]
    base = {
        "system": "You fix failing tests.",
        "user_message": "Fix it.",
        "memory": {"goal": "fix refresh token rotation in the auth service", "namespace": "alice"},
        "task_state": [{"artifact_id": artifact_id}],
        "messages": [*history, call("call_1", "call_2")],
        "tool_results": [
            result("call_2", LOG, 600),
            result("call_1", {"rows": list(range(3000))}, 600),
        ],
    }
    budgets = {}
    for budget in (6000, 1500, 900, 300):
        response = await client.post(
            "/v1/assemble", json={**base, "budget_tokens": budget}, headers=key.headers
        )
        assert response.status_code == 200, (budget, response.text)
        body = response.json()
        assert body["used_tokens"] <= budget
        budgets[budget] = {r["layer"]: r["status"] for r in body["layers"]}
        # The calls and their results stay, in the order of the calls, after their message.
        assert roles(body)[-3:] == ["assistant", "tool", "tool"]
        assert [m["tool_call_id"] for m in body["messages"][-2:]] == ["call_1", "call_2"]
        json.loads(body["messages"][-2]["content"])  # the JSON result is still JSON
        cut_layers = [c["layer"] for c in body["cuts"]]
        order = ["history", "memory", "task_state", "tool_results"]
        assert cut_layers == sorted(cut_layers, key=order.index)
    assert budgets[6000]["history"] == "kept"
    assert budgets[1500]["history"] in ("trimmed", "dropped")
    assert budgets[1500]["tool_results"] == "kept"
    assert budgets[300]["history"] == "dropped" and budgets[300]["memory"] == "dropped"
    assert budgets[300]["task_state"] == "dropped" and budgets[300]["tool_results"] == "trimmed"


async def test_system_and_user_alone_over_budget_is_422(
    client: httpx.AsyncClient, key: Key
) -> None:
    response = await client.post(
        "/v1/assemble",
        json={"budget_tokens": 64, "system": "rule " * 100, "user_message": "hi"},
        headers=key.headers,
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "budget_tokens"


async def test_an_invalid_sequence_is_422_naming_the_message(
    client: httpx.AsyncClient, key: Key
) -> None:
    cases = [
        (
            {"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]},
            "messages.0.tool_call_id",
        ),
        ({"messages": [call("c1"), {"role": "user", "content": "x"}]}, "messages.0.tool_calls"),
        ({"messages": [call("c1")], "tool_results": [result("c2", "x")]}, "messages.0.tool_calls"),
        (
            {"messages": [call("c1", "c2")], "tool_results": [result("c1", "x")]},
            "messages.0.tool_calls",
        ),
        (
            {
                "messages": [call("c1"), {"role": "user", "content": "x"}],
                "tool_results": [result("c1", "x")],
            },
            "messages.1",
        ),
        ({"tool_results": [result("c1", "x"), result("c1", "y")]}, "tool_results.1.tool_call_id"),
        ({"tool_results": [result("c1", "x", name=SECRET)]}, "tool_results.0.tool_name"),
        ({"messages": [{"role": "user", "tool_call_id": "c1", "content": "x"}]}, "messages.0"),
    ]
    for extra, field in cases:
        response = await client.post(
            "/v1/assemble",
            json={"budget_tokens": 2000, "user_message": "go", **extra},
            headers=key.headers,
        )
        assert response.status_code == 422, (extra, response.text)
        assert response.json()["error"]["field"] == field, (extra, response.text)
        assert SECRET not in response.text


async def test_tool_results_without_their_call_get_one(client: httpx.AsyncClient, key: Key) -> None:
    response = await client.post(
        "/v1/assemble",
        json={"budget_tokens": 2000, "user_message": "go", "tool_results": [result("c9", "ok")]},
        headers=key.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["synthesized_tool_call"] is True
    assert roles(body) == ["user", "assistant", "tool"]
    assert body["messages"][1]["tool_calls"][0]["id"] == "c9"


async def test_reach_and_scope(client: httpx.AsyncClient, key: Key, make_key: KeyFactory) -> None:
    artifact_id = await seed(client, key)
    stranger = await make_key()
    missing = await client.post(
        "/v1/assemble",
        json={
            "budget_tokens": 2000,
            "user_message": "go",
            "task_state": [{"artifact_id": artifact_id}],
        },
        headers=stranger.headers,
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["field"] == "task_state.0.artifact_id"
    writer = await make_key(org=key.org, scopes=["write"])
    denied = await client.post(
        "/v1/assemble", json={"budget_tokens": 2000, "user_message": "go"}, headers=writer.headers
    )
    assert denied.status_code == 403


async def test_a_memory_namespace_holding_a_secret_is_refused_even_when_cut(
    client: httpx.AsyncClient, key: Key
) -> None:
    aws = "AKIA" + "Z9" * 8
    for budget in (2000, 64):  # 64: no room for the pack, which is dropped
        refused = await client.post(
            "/v1/assemble",
            json={
                "budget_tokens": budget,
                "user_message": "go",
                "memory": {"goal": "refresh tokens", "namespace": f"alice:{aws}"},
            },
            headers=key.headers,
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["field"] == "memory.namespace"
        assert aws not in refused.text
