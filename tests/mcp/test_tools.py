"""The MCP tools through the SDK's in-memory client, against real Postgres."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from service.schemas.context import ContextRequest
from service.schemas.memories import RememberRequest
from tests.conftest import Key, KeyFactory
from tests.mcp.conftest import Connect, structured

FACT = "We chose Postgres full-text search over Elasticsearch to keep one datastore."


def facts(n: int, size: int = 0) -> list[str]:
    pad = " Detail: " + "lorem ipsum dolor sit amet " * (size // 27) if size else ""
    return [
        f"Service {i} owns the {i}th queue and drains it every {i + 1} minutes.{pad}"
        for i in range(n)
    ]


async def test_lists_the_tools_with_schemas_from_the_http_models(
    connect: Connect, key: Key
) -> None:
    async with connect(key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "wake",
        "context",
        "remember",
        "recall_artifact",
        "list_memories",
        "forget",
        "erase_namespace",
        "tool_result",
        "assemble",
    }
    assert tools["remember"].input_schema == RememberRequest.model_json_schema()
    context_fields = set(ContextRequest.model_json_schema()["properties"])
    assert context_fields | {"max_bytes", "head", "tail"} == set(
        tools["context"].input_schema["properties"]
    )
    assert tools["context"].input_schema["required"] == ["goal", "namespace"]
    assert tools["wake"].input_schema["properties"]["layer"]["const"] == "wake"
    assert tools["wake"].input_schema["required"] == ["namespace"]  # the goal is optional
    assert tools["list_memories"].input_schema["properties"]["limit"]["maximum"] == 200
    assert tools["forget"].annotations is not None
    assert tools["forget"].annotations.destructive_hint
    assert tools["list_memories"].annotations is not None
    assert tools["list_memories"].annotations.read_only_hint
    for tool in tools.values():
        assert len(tool.description or "") > 200, tool.name
        assert "Returns" in (tool.description or ""), tool.name


async def test_remember_answers_consumed_and_the_http_body(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    async with connect(key) as mcp:
        result = await mcp.call_tool(
            "remember", {"content": FACT, "namespace": "alice", "type": "decision"}
        )
        again = await mcp.call_tool(
            "remember", {"content": FACT, "namespace": "alice", "type": "decision"}
        )
    assert not result.is_error, result
    body = structured(result)
    assert body["status"] == "created"
    assert body["facet"] == "decisions"
    assert result.meta is not None
    assert result.meta["context"] == {"consumed": True}
    assert json.loads(result.content[0].text) == body
    assert structured(again)["status"] == "duplicate"
    assert structured(again)["id"] == body["id"]
    assert again.meta is not None
    assert again.meta["context"] == {"consumed": True}
    stored = await client.get(f"/v1/memories/{body['id']}", headers=key.headers)
    assert stored.json()["content"] == FACT


async def test_remember_failures_are_tool_errors_with_the_http_codes(
    connect: Connect, key: Key
) -> None:
    async with connect(key) as mcp:
        gated = await mcp.call_tool("remember", {"content": "ok thanks", "namespace": "alice"})
        missing = await mcp.call_tool("remember", {"namespace": "alice"})
        bad_ns = await mcp.call_tool(
            "remember", {"content": FACT, "namespace": "no spaces allowed"}
        )
        unknown_link = await mcp.call_tool(
            "remember", {"content": FACT, "namespace": "alice", "supersedes": str(uuid.uuid4())}
        )
    for result in (gated, missing, bad_ns, unknown_link):
        assert result.is_error
        assert "context" not in (result.meta or {}), "a failed remember consumes nothing"
        assert json.loads(result.content[0].text) == structured(result)
    error = structured(gated)["error"]
    assert (error["code"], error["status"], error["field"]) == ("gate_rejected", 422, "content")
    assert error["reasons"][0]["code"] == "fragment"
    assert error["reasons"][0]["hint"]
    error = structured(missing)["error"]
    assert (error["code"], error["field"]) == ("validation_error", "content")
    assert error["message"] == "content: Field required"
    assert structured(bad_ns)["error"]["field"] == "namespace"
    error = structured(unknown_link)["error"]
    assert (error["code"], error["field"]) == ("validation_error", "supersedes")


async def test_redaction_reported_and_secret_never_echoed(connect: Connect, key: Key) -> None:
    secret = "sk-" + "A1b2C3d4" * 6
    async with connect(key) as mcp:
        result = await mcp.call_tool(
            "remember",
            {
                "content": f"The staging OpenAI key is {secret} and rotates monthly.",
                "namespace": "alice",
            },
        )
        invalid = await mcp.call_tool(
            "remember", {"content": secret, "namespace": "alice", "tags": [secret * 3]}
        )
    assert structured(result)["redactions"], result
    assert secret not in result.content[0].text
    assert secret not in invalid.content[0].text


async def test_scopes_projects_and_namespaces_apply(connect: Connect, make_key: KeyFactory) -> None:
    reader = await make_key(scopes=["read"])
    alice = await make_key(namespaces=["alice"])
    projected = await make_key(projects=["web"])
    async with connect(reader) as mcp:
        write = await mcp.call_tool("remember", {"content": FACT, "namespace": "alice"})
        forget = await mcp.call_tool("forget", {"id": str(uuid.uuid4())})
        listing = await mcp.call_tool("list_memories", {})
    assert structured(write)["error"]["code"] == "scope_denied"
    assert structured(forget)["error"]["code"] == "scope_denied"
    assert not listing.is_error
    async with connect(alice) as mcp:
        outside = await mcp.call_tool("remember", {"content": FACT, "namespace": "bob"})
        listing = await mcp.call_tool("list_memories", {"namespace": "bob"})
    assert structured(outside)["error"]["code"] == "namespace_access_denied"
    assert structured(outside)["error"]["status"] == 403
    assert structured(listing)["error"]["code"] == "namespace_access_denied"
    async with connect(projected) as mcp:
        other = await mcp.call_tool(
            "remember", {"content": FACT, "namespace": "a", "project": "api"}
        )
    assert structured(other)["error"]["code"] == "project_access_denied"


async def test_unknown_or_revoked_key(connect: Connect, key: Key, app: object) -> None:
    async with connect("ctxp_not-a-key") as mcp:
        result = await mcp.call_tool("list_memories", {})
        tools = await mcp.list_tools()  # listing needs no key: it reveals no data
    assert structured(result)["error"]["code"] == "unauthorized"
    assert structured(result)["error"]["status"] == 401
    assert tools.tools
    from service.domain import keys as key_service

    async with connect(key) as mcp:
        assert not (await mcp.call_tool("list_memories", {})).is_error
        state = app.state.ctx  # type: ignore[attr-defined]
        # With this process's cache, as the console does: the NOTIFY that reaches the other
        # processes may arrive after the next call (the test raced it).
        async with state.sessionmaker() as session:
            await key_service.revoke_key(session, str(key.key_id), cache=state.callers)
            await session.commit()
        revoked = await mcp.call_tool("list_memories", {})
    assert structured(revoked)["error"]["code"] == "unauthorized"


async def test_unknown_tool_is_a_tool_error(connect: Connect, key: Key) -> None:
    async with connect(key) as mcp:
        result = await mcp.call_tool("recall_everything", {})
    assert result.is_error
    assert structured(result)["error"]["code"] == "not_found"


async def test_list_memories_pages(connect: Connect, key: Key) -> None:
    async with connect(key) as mcp:
        for text in facts(5):
            assert not (
                await mcp.call_tool("remember", {"content": text, "namespace": "team:p"})
            ).is_error
        first = structured(
            await mcp.call_tool("list_memories", {"namespace": "team:*", "limit": 2})
        )
        last = structured(
            await mcp.call_tool("list_memories", {"namespace": "team:*", "limit": 2, "offset": 4})
        )
        beyond = structured(
            await mcp.call_tool("list_memories", {"namespace": "team:*", "offset": 10})
        )
        typed = structured(await mcp.call_tool("list_memories", {"type": "decision"}))
    assert (first["offset"], first["limit"], first["total"], first["has_more"]) == (0, 2, 5, True)
    assert first["next_offset"] == 2
    assert len(first["items"]) == 2
    assert "truncated" not in first
    assert (last["total"], last["has_more"], last["next_offset"], len(last["items"])) == (
        5,
        False,
        None,
        1,
    )
    assert beyond["items"] == []
    assert not beyond["has_more"]
    assert typed["total"] == 0


async def test_list_memories_stays_under_max_bytes(connect: Connect, key: Key) -> None:
    async with connect(key) as mcp:
        for text in facts(6, size=1500):
            assert not (
                await mcp.call_tool("remember", {"content": text, "namespace": "big"})
            ).is_error
        page = await mcp.call_tool("list_memories", {"namespace": "big", "max_bytes": 4000})
        whole = structured(
            await mcp.call_tool("list_memories", {"namespace": "big", "max_bytes": None})
        )
        tiny = await mcp.call_tool("list_memories", {"namespace": "big", "max_bytes": 600})
        too_small = await mcp.call_tool("list_memories", {"max_bytes": 10})
    body = structured(page)
    assert len(page.content[0].text.encode()) <= 4000
    assert 1 <= len(body["items"]) < 6
    assert body["has_more"]
    assert body["next_offset"] == len(body["items"])
    assert body["truncated"] == {
        "reason": "max_bytes",
        "max_bytes": 4000,
        "items_dropped": 6 - len(body["items"]),
        "content_clipped": False,
    }
    assert len(whole["items"]) == 6
    assert "truncated" not in whole
    small = structured(tiny)
    assert len(small["items"]) == 1
    assert small["items"][0]["content"].endswith("…")
    assert small["truncated"]["content_clipped"]
    assert len(tiny.content[0].text.encode()) <= 600
    assert structured(too_small)["error"]["field"] == "max_bytes"


async def test_forget_erases(connect: Connect, key: Key, client: httpx.AsyncClient) -> None:
    async with connect(key) as mcp:
        memory_id = structured(
            await mcp.call_tool("remember", {"content": FACT, "namespace": "alice"})
        )["id"]
        gone = await mcp.call_tool("forget", {"id": memory_id})
        twice = await mcp.call_tool("forget", {"id": memory_id})
        not_an_id = await mcp.call_tool("forget", {"id": "42"})
    assert structured(gone)["deleted"] is True
    assert (await client.get(f"/v1/memories/{memory_id}", headers=key.headers)).status_code == 404
    assert structured(twice)["error"]["code"] == "not_found"
    assert structured(not_an_id)["error"]["field"] == "id"


async def test_erase_namespace_erases_the_subtree(
    connect: Connect, key: Key, client: httpx.AsyncClient
) -> None:
    async with connect(key) as mcp:
        memory_id = structured(
            await mcp.call_tool("remember", {"content": FACT, "namespace": "zoe:s1"})
        )["id"]
        unconfirmed = await mcp.call_tool("erase_namespace", {"namespace": "zoe", "confirm": "zo"})
        receipt = await mcp.call_tool("erase_namespace", {"namespace": "zoe", "confirm": "zoe"})
    assert structured(unconfirmed)["error"]["field"] == "confirm"
    assert structured(receipt)["erased"]["memories"] == 1
    assert structured(receipt)["audit_id"]
    assert (await client.get(f"/v1/memories/{memory_id}", headers=key.headers)).status_code == 404


async def test_other_orgs_memories_are_invisible(connect: Connect, make_key: KeyFactory) -> None:
    mine, theirs = await make_key(), await make_key()
    async with connect(theirs) as mcp:
        their_id = structured(
            await mcp.call_tool("remember", {"content": FACT, "namespace": "alice"})
        )["id"]
    async with connect(mine) as mcp:
        listing = structured(await mcp.call_tool("list_memories", {}))
        forget = await mcp.call_tool("forget", {"id": their_id})
    assert listing["total"] == 0
    assert structured(forget)["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("tool", "arguments", "action", "outcome", "status"),
    [
        ("remember", {"content": FACT, "namespace": "alice"}, "remember", "created", 201),
        ("remember", {"content": "ok thanks", "namespace": "alice"}, "remember", "rejected", 422),
        ("remember", {"namespace": "alice"}, "remember", "rejected", 422),
        ("list_memories", {}, "list", "ok", 200),
        ("forget", {"id": str(uuid.uuid4())}, "delete", "refused", 404),
    ],
)
async def test_tool_calls_are_audited_with_the_http_actions(
    connect: Connect,
    key: Key,
    client: httpx.AsyncClient,
    tool: str,
    arguments: dict[str, object],
    action: str,
    outcome: str,
    status: int,
) -> None:
    async with connect(key) as mcp:
        await mcp.call_tool(tool, arguments)
    rows = (await client.get("/v1/audit", params={"full": "true"}, headers=key.headers)).json()[
        "items"
    ]
    assert [(r["action"], r["outcome"], r["status_code"]) for r in rows] == [
        (action, outcome, status)
    ]
    assert rows[0]["key_id"] == str(key.key_id)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"content": FACT + "\x00"}, "content"),
        ({"content": FACT, "metadata": {"note": "a\x00b"}}, "metadata.note"),
        ({"content": FACT, "url": "https://example.com/\x00"}, "url"),
        ({"content": FACT, "source": "\ud800"}, "source"),
        ({"content": FACT, "metadata": {"k\x00": 1}}, "metadata.k\x00"),
    ],
)
async def test_text_postgres_cannot_store_is_a_validation_error(
    connect: Connect, key: Key, arguments: dict[str, object], field: str
) -> None:
    """What the HTTP JSON guard refuses is refused over MCP too (stdio has no HTTP guard)."""
    async with connect(key) as mcp:
        result = await mcp.call_tool("remember", {"namespace": "alice", **arguments})
    error = structured(result)["error"]
    assert (error["code"], error["status"], error["field"]) == ("validation_error", 422, field)
