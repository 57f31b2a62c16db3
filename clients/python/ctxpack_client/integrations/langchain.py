"""LangChain tools ``remember`` and ``context``, bound to a ctxpack namespace.

    from ctxpack_client import Client
    from ctxpack_client.integrations.langchain import ctxpack_tools
    tools = ctxpack_tools(Client(), namespace="alice:s1")

``context`` draws on the bound namespace and its ancestors (``alice:s1`` sees ``alice``).
``remember`` stores at the ``scope`` the model picks: ``user`` (the first segment: what every
later session of this user should know, the default), ``session`` or ``task``, never below the
bound namespace. A gate rejection comes back to the model as the tool's answer, with the
reason codes and hints, so it can rephrase; other errors raise.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from ctxpack_client._client import AsyncClient, Client
from ctxpack_client.errors import GateRejected
from ctxpack_client.models import ContextResponse, MemoryType, RememberResponse

Scope = Literal["user", "session", "task"]
_DEPTH = {"user": 1, "session": 2, "task": 3}

REMEMBER_DESCRIPTION = (
    "Store a durable lesson for future sessions: a decision, a gotcha, a procedure, a fact "
    "you had to find out. Not raw tool output, logs or step-by-step reasoning (refused). "
    "Give a short stable `key` to replace an older version of the same memory."
)
CONTEXT_DESCRIPTION = (
    "Get what earlier sessions learned that is relevant to a goal: a ranked, "
    "token-budgeted markdown pack. Call it before starting a task."
)


class RememberArgs(BaseModel):
    content: str = Field(description="The lesson, in a sentence or a short paragraph")
    type: MemoryType = Field("gotcha", description="decision, gotcha, procedure, rule, ...")
    key: str | None = Field(None, description="A stable name: writing it again replaces it")
    scope: Scope = Field("user", description="user: every later session; session: this one")


class ContextArgs(BaseModel):
    goal: str = Field(description="What you are about to do, in words")


def scoped(namespace: str, scope: Scope) -> str:
    """The bound namespace cut to ``scope`` (never deeper than the namespace itself)."""
    parts = namespace.split(":")
    return ":".join(parts[: min(_DEPTH[scope], len(parts))])


def _stored(result: RememberResponse) -> str:
    extra = f", replacing {result.superseded_id}" if result.superseded_id else ""
    return f"{result.status} memory {result.id} in {result.namespace}{extra}"


def _rejected(exc: GateRejected) -> str:
    hints = "; ".join(f"{r.get('code')}: {r.get('hint')}" for r in exc.reasons)
    return f"Not stored, the write gate rejected it: {hints}"


def _pack(pack: ContextResponse) -> str:
    return pack.markdown if pack.total_items else "No stored memory is relevant to this goal."


def ctxpack_tools(
    client: Client | None = None,
    namespace: str = "",
    *,
    async_client: AsyncClient | None = None,
    project: str | None = None,
    markdown_token_budget: int = 2000,
) -> list[BaseTool]:
    """``[remember, context]`` as LangChain tools bound to ``namespace``.

    Args:
        client: the sync client (built from CTXPACK_URL / CTXPACK_API_KEY when absent).
        namespace: ``user[:session[:task]]`` the agent works in.
        async_client: used by the tools' async path (``ainvoke``); built when absent.
        project: tag writes and narrow packs to a project.
        markdown_token_budget: the pack's size in tokens.
    """
    if not namespace:
        raise ValueError("namespace is required: user[:session[:task]]")
    sync = client or Client()
    state: dict[str, AsyncClient] = {}

    def aclient() -> AsyncClient:
        if async_client is not None:
            return async_client
        if "client" not in state:
            state["client"] = AsyncClient(
                sync.config.base_url, sync.config.api_key, timeout=sync.config.timeout
            )
        return state["client"]

    def remember(content: str, type: str = "gotcha", key: str | None = None, scope: Scope = "user") -> str:
        try:
            return _stored(sync.remember(content, scoped(namespace, scope), type=type, key=key, project=project))
        except GateRejected as exc:
            raise ToolException(_rejected(exc)) from exc

    async def aremember(content: str, type: str = "gotcha", key: str | None = None, scope: Scope = "user") -> str:
        try:
            result = await aclient().remember(
                content, scoped(namespace, scope), type=type, key=key, project=project
            )
        except GateRejected as exc:
            raise ToolException(_rejected(exc)) from exc
        return _stored(result)

    def context(goal: str) -> str:
        return _pack(sync.context(goal, namespace, project=project, markdown_token_budget=markdown_token_budget))

    async def acontext(goal: str) -> str:
        return _pack(
            await aclient().context(
                goal, namespace, project=project, markdown_token_budget=markdown_token_budget
            )
        )

    common: dict[str, Any] = {"handle_tool_error": True}
    return [
        StructuredTool.from_function(
            func=remember, coroutine=aremember, name="remember",
            description=REMEMBER_DESCRIPTION, args_schema=RememberArgs, **common,
        ),
        StructuredTool.from_function(
            func=context, coroutine=acontext, name="context",
            description=CONTEXT_DESCRIPTION, args_schema=ContextArgs, **common,
        ),
    ]
