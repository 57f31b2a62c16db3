"""The MCP server: the tools of ``service.mcp.tools`` on the SDK's low-level ``Server``.

``build_server(backend)`` is called once per process (once per app lifespan for /mcp, once
for ``ctxpack mcp``): the backend holds the resources; the server's own lifespan, which the SDK
enters per connection or per session manager, holds nothing.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server
from pydantic import ValidationError

from service.errors import NotFound
from service.mcp.backends import Backend, RequestContext
from service.mcp.inputs import unstorable_text
from service.mcp.results import from_exception, invalid_arguments
from service.mcp.tools import TOOLS, ToolSpec

INSTRUCTIONS = """\
ctxpack is your long-term memory. At the start of a session call `wake` with what the session \
is about; before a task call `context` with your goal; when you reach a conclusion worth \
keeping (a decision, a constraint, a gotcha, a procedure that worked) call `remember`. A pack \
shows artifacts as summaries: read the fields you need with `recall_artifact`. Use \
`list_memories` to browse and `forget` to erase a memory that is wrong.
"""


def build_server(backend: Backend, *, tools: tuple[ToolSpec, ...] = TOOLS) -> Server[Any]:
    """An MCP server whose tools call ``backend``."""
    by_name = {spec.name: spec for spec in tools}
    listing = [spec.to_tool() for spec in tools]

    async def list_tools(
        rc: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(rc: RequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = by_name.get(params.name)
        try:
            if spec is None:
                raise NotFound(f"unknown tool {params.name!r}; the tools are {', '.join(by_name)}")
            arguments = params.arguments or {}
            refusal = unstorable_text(arguments)
            if refusal is None:
                try:
                    args = spec.input_model.model_validate(arguments)
                except ValidationError as exc:
                    refusal = invalid_arguments(exc)
            if refusal is not None:
                await backend.refused(rc, spec.action, refusal)
                raise refusal
            return await spec.run(backend, rc, args)
        except Exception as exc:  # as the API's handlers do: coded errors, else internal_error
            return from_exception(exc, params.name)

    return Server(
        "ctxpack",
        version="0.1.0",
        title="ctxpack",
        description="Long-term memory for agents: gated, redacting remember and goal-shaped context packs.",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
