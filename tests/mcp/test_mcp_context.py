"""context and wake as MCP tools: the pack as text, the transient-context ``_meta``, limits."""

from __future__ import annotations

import httpx

from tests.conftest import Key, KeyFactory
from tests.mcp.conftest import Connect, structured

MEMORIES = [
    ("decision", "We chose Postgres full-text search over Elasticsearch to keep one datastore."),
    ("gotcha", "The refresh token endpoint rejects tokens older than 30 days with a bare 400."),
    (
        "procedure",
        "To rotate the refresh token signing key, run make rotate-keys then redeploy auth.",
    ),
    ("constraint", "Refresh tokens must never be logged, not even truncated."),
    ("task", "Migrating the refresh token store from Redis to Postgres; half the tables are done."),
    (
        "episode",
        "Yesterday the auth deploy failed because the refresh token migration was not applied.",
    ),
]


async def seed(connect: Connect, key: Key | str, namespace: str = "alice") -> list[str]:
    ids = []
    async with connect(key) as mcp:
        for type_, content in MEMORIES:
            result = await mcp.call_tool(
                "remember", {"content": content, "namespace": namespace, "type": type_}
            )
            assert not result.is_error, result
            ids.append(structured(result)["id"])
    return ids


async def test_context_returns_the_pack_marked_transient(connect: Connect, key: Key) -> None:
    ids = await seed(connect, key)
    async with connect(key) as mcp:
        result = await mcp.call_tool(
            "context",
            {"goal": "fix the refresh token expiry bug", "namespace": "alice", "intent": "debug"},
        )
    assert not result.is_error, result
    body = structured(result)
    text = result.content[0].text
    assert text.startswith("# Context for: fix the refresh token expiry bug")
    assert body["text"] == text
    assert body["total_items"] == len(body["items"]) > 0
    returned = [item["id"] for item in body["items"]]
    assert set(returned) <= set(ids)
    for memory_id in returned:
        assert memory_id in text, "every item's id is in the text"
    assert body["truncated"] is False
    assert result.meta is not None
    context = result.meta["context"]
    assert context["lifecycle"] == "transient"
    assert context["summary"].startswith(
        f"{body['total_items']} items for goal 'fix the refresh token expiry bug' (recall pack at alice), ids "
    )
    assert returned[0] in context["summary"]
    assert "contextHints" not in result.meta


async def test_context_is_the_http_pack(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    await seed(connect, key)
    request = {"goal": "rotate the refresh token signing key", "namespace": "alice"}
    async with connect(key) as mcp:
        via_mcp = structured(await mcp.call_tool("context", request))
    via_http = (await client.post("/v1/context", json=request, headers=key.headers)).json()
    assert [i["id"] for i in via_mcp["items"]] == [
        str(i["id"]) for s in via_http["sections"] for i in s["items"]
    ]
    assert via_mcp["text"].startswith(via_http["markdown"].rstrip("\n"))


async def test_nothing_relevant_says_so(connect: Connect, key: Key) -> None:
    async with connect(key) as mcp:
        result = await mcp.call_tool(
            "context", {"goal": "bake sourdough bread", "namespace": "nobody"}
        )
    body = structured(result)
    assert body["total_items"] == 0
    assert body["items"] == []
    assert result.meta is not None
    assert result.meta["context"]["summary"].endswith(": nothing relevant stored")


async def test_wake_is_a_small_stable_pack_and_registers_hints(connect: Connect, key: Key) -> None:
    await seed(connect, key)
    wake = {"goal": "continue the refresh token migration", "namespace": "alice"}
    async with connect(key) as mcp:
        first = await mcp.call_tool("wake", wake)
        again = await mcp.call_tool("wake", wake)
        goalless = await mcp.call_tool("wake", {"namespace": "alice"})
        no_goal_context = await mcp.call_tool("context", {"namespace": "alice"})
    assert not first.is_error, first
    body = structured(first)
    assert body["layer"] == "wake"
    assert 0 < body["total_items"] <= 8
    assert first.content[0].text == again.content[0].text, "wake packs are byte-stable"
    assert first.meta is not None
    assert first.meta["context"]["lifecycle"] == "transient"
    assert "(wake pack at alice)" in first.meta["context"]["summary"]
    assert not goalless.is_error, goalless
    assert structured(goalless)["goal"] is None
    assert structured(goalless)["total_items"] == body["total_items"]
    assert goalless.content[0].text.startswith("# Wake pack: where things stand")
    assert "no goal (wake pack at alice)" in goalless.meta["context"]["summary"]
    assert structured(no_goal_context)["error"]["field"] == "goal"
    assert first.meta["contextHints"] == [
        {"tool": "context", "lifecycle": "transient", "consumedBy": "remember"},
        {"tool": "wake", "lifecycle": "transient", "consumedBy": "remember"},
    ]


async def test_context_text_limits(connect: Connect, key: Key) -> None:
    await seed(connect, key)
    goal = {"goal": "refresh token work", "namespace": "alice", "intent": "general"}
    async with connect(key) as mcp:
        whole = await mcp.call_tool("context", goal)
        small = await mcp.call_tool("context", {**goal, "max_bytes": 600})
        head = await mcp.call_tool("context", {**goal, "head": 2})
        tail = await mcp.call_tool("context", {**goal, "tail": 3})
        bad = await mcp.call_tool("context", {**goal, "max_bytes": 100})
    full = whole.content[0].text
    assert len(full.encode()) > 600
    cut = structured(small)
    assert len(small.content[0].text.encode()) <= 600
    assert cut["truncated"] is True
    assert cut["truncation"]["position"] == "head"
    assert cut["truncation"]["original_bytes"] == len(full.encode())
    assert small.content[0].text.splitlines()[-1].startswith("[truncated: kept the first")
    assert head.content[0].text.splitlines()[:2] == full.splitlines()[:2]
    assert structured(head)["truncation"]["kept_lines"] == 2
    assert tail.content[0].text.splitlines()[:3] == full.splitlines()[-3:]
    assert structured(bad)["error"]["code"] == "validation_error"
    assert structured(bad)["error"]["field"] == "max_bytes"


async def test_context_errors_carry_http_codes(connect: Connect, make_key: KeyFactory) -> None:
    alice = await make_key(namespaces=["alice"])
    web = await make_key(projects=["web"])
    async with connect(alice) as mcp:
        outside = await mcp.call_tool("context", {"goal": "anything at all", "namespace": "bob"})
        empty = await mcp.call_tool("context", {"goal": "  ", "namespace": "alice"})
        layer = await mcp.call_tool(
            "context", {"goal": "x y z", "namespace": "alice", "layer": "dream"}
        )
        wake_layer = await mcp.call_tool(
            "wake", {"goal": "x y z", "namespace": "alice", "layer": "recall"}
        )
    async with connect(web) as mcp:
        project = await mcp.call_tool(
            "context", {"goal": "anything at all", "namespace": "a", "project": "api"}
        )
    assert structured(outside)["error"]["code"] == "namespace_access_denied"
    assert (structured(empty)["error"]["code"], structured(empty)["error"]["field"]) == (
        "validation_error",
        "goal",
    )
    assert structured(layer)["error"]["field"] == "layer"
    assert structured(wake_layer)["error"]["field"] == "layer"
    assert structured(project)["error"]["code"] == "project_access_denied"
    assert structured(project)["error"]["status"] == 403
    for failed in (outside, empty, project):
        assert failed.is_error
        assert "context" not in (failed.meta or {})


async def test_context_calls_are_audited(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    async with connect(key) as mcp:
        await mcp.call_tool("context", {"goal": "anything at all", "namespace": "alice"})
        await mcp.call_tool("wake", {"goal": "anything at all", "namespace": "alice"})
        await mcp.call_tool("context", {"goal": "", "namespace": "alice"})
    rows = (
        await client.get("/v1/audit", params={"action": "context"}, headers=key.headers)
    ).json()["items"]
    assert sorted((r["outcome"], r["status_code"]) for r in rows) == [
        ("ok", 200),
        ("ok", 200),
        ("rejected", 422),
    ]
