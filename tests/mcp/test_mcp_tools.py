"""The MCP tools through the SDK's in-memory client, against real Postgres."""

from __future__ import annotations

import json

from tests.conftest import Key
from tests.mcp.conftest import Connect, structured

FACT = "We chose Postgres full-text search over Elasticsearch to keep one datastore."


async def test_lists_the_tools_with_schemas_from_the_http_models(connect: Connect, key: Key) -> None:
    from service.schemas.memories import RememberRequest

    async with connect(key) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"remember", "list_memories", "forget"} <= set(tools)
    assert tools["remember"].input_schema == RememberRequest.model_json_schema()
    assert "write gate" in (tools["remember"].description or "")


async def test_remember_then_list_then_forget(connect: Connect, key: Key) -> None:
    async with connect(key) as client:
        result = await client.call_tool("remember", {"content": FACT, "namespace": "alice", "type": "decision"})
        assert not result.is_error, result
        body = structured(result)
        assert body["status"] == "created"
        assert result.meta["context"] == {"consumed": True}
        assert json.loads(result.content[0].text)["id"] == body["id"]
        bad = await client.call_tool("remember", {"content": "x", "namespace": "alice"})
        print(bad)
        assert bad.is_error
        listed = await client.call_tool("list_memories", {})
        print(listed)
