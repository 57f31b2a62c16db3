"""The OpenAI Agents SDK's streamable-HTTP MCP server class, pointed at ctxpack's ``/mcp``.

    from ctxpack_client.integrations.openai_agents import ctxpack_mcp_server
    async with ctxpack_mcp_server() as server:      # CTXPACK_URL / CTXPACK_API_KEY
        tools = await server.list_tools()
        agent = Agent(name="dev", instructions="...", mcp_servers=[server])

Nothing of ctxpack runs in the agent's process: the SDK speaks MCP to the server, with the
API key as a Bearer token, and the key's scopes, projects and namespaces apply to every tool.
"""

from __future__ import annotations

import os

from agents.mcp import MCPServerStreamableHttp

from ctxpack_client._core import DEFAULT_URL


def ctxpack_mcp_server(
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    timeout: float = 30.0,
    cache_tools_list: bool = True,
    name: str = "ctxpack",
) -> MCPServerStreamableHttp:
    """An ``MCPServerStreamableHttp`` for ctxpack (enter it with ``async with``)."""
    url = (base_url or os.environ.get("CTXPACK_URL") or DEFAULT_URL).rstrip("/")
    key = api_key if api_key is not None else os.environ.get("CTXPACK_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return MCPServerStreamableHttp(
        params={"url": f"{url}/mcp", "headers": headers, "timeout": timeout},
        cache_tools_list=cache_tools_list,
        name=name,
        client_session_timeout_seconds=timeout,
    )
