"""mcp/server.py: the MCP server over a backend. It lists the tools of the table, checks a
call's arguments before the backend runs it (text Postgres cannot store, then the tool's input
model: either refusal is audited as the tool's action and answered as a tool error naming the
field), answers an unknown tool as ``not_found``, and never lets an exception escape as a
protocol error."""

from __future__ import annotations

from service.mcp.server import INSTRUCTIONS
from service.mcp.tools import TOOLS
from tests.conftest import Key, McpConnect, SqlRows, audit_transports
from tests.mcp.conftest import structured


async def test_the_server_lists_the_tables_tools_with_its_instructions(
    mcp_connect: McpConnect, key: Key
) -> None:
    async with mcp_connect(key) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == [spec.name for spec in TOOLS]
        assert client.instructions == INSTRUCTIONS


async def test_unstorable_text_is_refused_before_the_backend_and_audited(
    mcp_connect: McpConnect, key: Key, sql: SqlRows
) -> None:
    async with mcp_connect(key) as client:
        result = await client.call_tool(
            "remember", {"namespace": "alice", "content": "The port is 5433.\x00"}
        )
    assert result.is_error
    error = structured(result)["error"]
    assert (error["code"], error["field"], error["status"]) == ("validation_error", "content", 422)
    assert await audit_transports(sql, key) == [("remember", 422, "mcp")]


async def test_arguments_the_input_model_refuses_name_their_field(
    mcp_connect: McpConnect, key: Key, sql: SqlRows
) -> None:
    async with mcp_connect(key) as client:
        result = await client.call_tool("list_memories", {"limit": 0, "surprise": 1})
    error = structured(result)["error"]
    assert error["code"] == "validation_error"
    assert {e["field"] for e in error["errors"]} == {"limit", "surprise"}
    assert await audit_transports(sql, key) == [("list", 422, "mcp")]


async def test_an_unknown_tool_is_not_found_as_a_tool_error(mcp_connect: McpConnect, key: Key) -> None:
    async with mcp_connect(key) as client:
        result = await client.call_tool("teleport", {})
    assert result.is_error
    error = structured(result)["error"]
    assert error["code"] == "not_found" and "remember" in error["message"]
