"""Keyed writes over MCP: ``remember`` with ``key`` and ``list_memories`` by key."""

from __future__ import annotations

from tests.conftest import Key
from tests.mcp.conftest import Connect, structured

V1 = "The staging database lives on port 5433, not the default 5432."
V2 = "The staging database moved to port 6543 after the November migration."


async def test_mcp_remember_and_list_by_key(connect: Connect, key: Key) -> None:
    async with connect(key) as mcp:
        first = structured(await mcp.call_tool("remember", {"content": V1, "namespace": "alice", "key": "db"}))
        again = structured(await mcp.call_tool("remember", {"content": V1, "namespace": "alice", "key": "db"}))
        second = structured(await mcp.call_tool("remember", {"content": V2, "namespace": "alice", "key": "db"}))
        assert (first["status"], again["status"], second["status"]) == ("created", "duplicate", "updated")
        assert second["superseded_id"] == first["id"]
        listed = structured(await mcp.call_tool("list_memories", {"namespace": "alice", "key": "db"}))
        assert [m["id"] for m in listed["items"]] == [second["id"]]
        assert listed["items"][0]["key"] == "db"
