"""The OpenAI Agents SDK's ``MCPServerStreamableHttp`` against a live ``ctxpack serve``'s
``/mcp``: it lists ctxpack's tools and calls ``remember`` (with a key) and ``context``. No LLM:
the SDK's MCP server object is driven directly, as an agent run would drive it."""

from __future__ import annotations

import json

from agents.mcp import MCPServerStreamableHttp
from ctxpack_client import Client
from ctxpack_client.integrations.openai_agents import ctxpack_mcp_server

FACT = "Feature flags are read from the flags table at request time, so flips need no deploy."


def _failed(result: object) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def _structured(result: object) -> dict:
    structured = getattr(result, "structuredContent", None) or getattr(result, "structured_content", None)
    if structured:
        return structured
    return json.loads(result.content[0].text)  # type: ignore[attr-defined]


async def test_agents_sdk_lists_and_calls_ctxpack_tools(ctxpack_env: str, cx: Client) -> None:
    server = ctxpack_mcp_server()
    assert isinstance(server, MCPServerStreamableHttp)
    async with server:
        names = {tool.name for tool in await server.list_tools()}
        assert {"remember", "context", "wake", "list_memories", "forget", "recall_artifact"} <= names

        first = await server.call_tool(
            "remember", {"content": FACT, "namespace": "mona", "type": "decision", "key": "feature-flags"}
        )
        assert not _failed(first), first
        stored = _structured(first)
        assert stored["status"] == "created" and stored["key"] == "feature-flags"
        again = _structured(await server.call_tool(
            "remember", {"content": FACT, "namespace": "mona", "type": "decision", "key": "feature-flags"}
        ))
        assert again["status"] == "duplicate" and again["id"] == stored["id"]
        newer = _structured(await server.call_tool(
            "remember",
            {"content": FACT.replace("request time", "startup"), "namespace": "mona", "type": "decision", "key": "feature-flags"},
        ))
        assert newer["status"] == "updated" and newer["superseded_id"] == stored["id"]

        pack = await server.call_tool("context", {"goal": "how do feature flags take effect", "namespace": "mona:s1"})
        assert not _failed(pack)
        text = pack.content[0].text
        assert newer["id"] in text and stored["id"] not in text

    assert cx.get_by_key("mona", "feature-flags").id.hex == newer["id"].replace("-", "")  # type: ignore[union-attr]


async def test_bad_key_is_refused_before_mcp(ctxpack_server: str) -> None:
    server = ctxpack_mcp_server(ctxpack_server, "ctx_not-a-key")
    refused = False
    try:
        async with server:
            await server.list_tools()
    except BaseException as exc:  # the SDK wraps the 401 in its own error types
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        refused = True
    assert refused, "listing tools with a bad key succeeded"
