"""LangChain tools ``remember`` and ``context``, bound to a ctxpack namespace; and
``enveloped``, which passes any tool's output through ctxpack's tool-result envelope.

    from ctxpack_client import Client
    from ctxpack_client.integrations.langchain import ctxpack_tools, enveloped
    tools = ctxpack_tools(Client(), namespace="alice:s1")
    tools += enveloped([search_logs, kubectl_get], Client(), budget_tokens=800)

``enveloped`` tools answer, when called with a tool call (as LangGraph's ``ToolNode`` and
``create_react_agent`` do), the ``ToolMessage`` of the same ``tool_call_id`` whose content
went through POST /v1/tool-results: secrets redacted, then trimmed to the budget (a log keeps
its head, tail and error lines; JSON stays JSON). The raw output never reaches the model, the
graph's state or a checkpoint: the message carries no ``artifact``, and its
``response_metadata["ctxpack"]`` says what was cut and redacted (counts, never values).
When the envelope cannot be reached the tool fails rather than pass the raw output on.

``context`` draws on the bound namespace and its ancestors (``alice:s1`` sees ``alice``).
``remember`` stores at the ``scope`` the model picks: ``user`` (the first segment: what every
later session of this user should know, the default), ``session`` or ``task``, never below the
bound namespace. A gate rejection comes back to the model as the tool's answer, with the
reason codes and hints, so it can rephrase; other errors raise.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from ctxpack_client._client import AsyncClient, Client
from ctxpack_client.errors import GateRejected
from ctxpack_client.models import (
    ContextResponse,
    MemoryType,
    RememberResponse,
    Strategy,
    ToolResultResponse,
)

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


# --- the tool-result envelope ---------------------------------------------------------------

DIRECT_CALL_ID = "direct"
"""The call id the envelope sees when a wrapped tool is invoked without a tool call."""


def _text(content: Any) -> Any:
    """A ToolMessage's content as the envelope takes it: text, or content blocks' text."""
    if isinstance(content, list):
        parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in content]
        return "\n".join(p for p in parts if p)
    return content


def _report(env: ToolResultResponse) -> dict[str, Any]:
    return {
        "tokens_before": env.tokens_before,
        "tokens_after": env.tokens_after,
        "strategy": env.strategy,
        "cuts": [c.model_dump() for c in env.cuts],
        "redactions": [r.model_dump() for r in env.redactions],
        "audit_id": str(env.audit_id) if env.audit_id else None,
    }


class EnvelopedTool(BaseTool):
    """A tool whose every output passes through ctxpack's envelope (see the module
    docstring). Build it with ``enveloped``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool
    client: Any = None
    async_client: Any = None
    budget_tokens: int = 800
    strategy: Strategy = "auto"
    fields: list[str] | None = None

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"budget_tokens": self.budget_tokens, "strategy": self.strategy}
        if self.fields:
            options["fields"] = list(self.fields)
        return options

    def _wrap(self, out: Any, env: ToolResultResponse) -> Any:
        if isinstance(out, ToolMessage):
            return ToolMessage(
                content=env.content,
                tool_call_id=out.tool_call_id,
                name=out.name or self.name,
                status=out.status,
                response_metadata={"ctxpack": _report(env)},
            )
        return env.content

    @staticmethod
    def _raw(out: Any) -> tuple[str, Any]:
        if isinstance(out, ToolMessage):
            return out.tool_call_id, _text(out.content)
        if isinstance(out, str | dict | list | int | float | bool) or out is None:
            return DIRECT_CALL_ID, out
        return DIRECT_CALL_ID, json.loads(json.dumps(out, default=str))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        out = self.inner.invoke(input, config, **kwargs)
        if isinstance(out, ToolMessage) and out.status == "error":
            return out  # an error message is the tool's own text, not its output
        call_id, raw = self._raw(out)
        env = self._client().tool_result(call_id, self.inner.name, raw, **self._options())
        return self._wrap(out, env)

    def _client(self) -> Client:
        if self.client is None:  # built once, from CTXPACK_URL / CTXPACK_API_KEY
            self.client = Client()
        client: Client = self.client
        return client

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        out = await self.inner.ainvoke(input, config, **kwargs)
        if isinstance(out, ToolMessage) and out.status == "error":
            return out
        call_id, raw = self._raw(out)
        if self.async_client is not None:
            env = await self.async_client.tool_result(call_id, self.inner.name, raw, **self._options())
        else:
            import asyncio

            env = await asyncio.to_thread(
                self._client().tool_result, call_id, self.inner.name, raw, **self._options()
            )
        return self._wrap(out, env)

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - invoke is overridden
        raise NotImplementedError("EnvelopedTool runs through invoke")


def enveloped(
    tools: BaseTool | list[BaseTool],
    client: Client | None = None,
    *,
    async_client: AsyncClient | None = None,
    budget_tokens: int = 800,
    strategy: Strategy = "auto",
    fields: dict[str, list[str]] | None = None,
) -> list[BaseTool]:
    """``tools``, each wrapped so its output passes through ctxpack's envelope before a model
    sees it.

    Args:
        tools: LangChain tools (any ``BaseTool``: ``@tool`` functions, StructuredTools...).
        client: the sync client (built from CTXPACK_URL / CTXPACK_API_KEY when absent).
        async_client: used on the async path (``ainvoke``); else the sync client in a thread.
        budget_tokens: the most tokens a result may take.
        strategy: ``auto`` (default), ``text``, ``json``, ``summary``, ``first_n``.
        fields: per tool name, the JSON paths to keep (``{"kubectl_get": ["items.metadata.name"]}``).
    """
    items = [tools] if isinstance(tools, BaseTool) else list(tools)
    return [
        EnvelopedTool(
            name=t.name,
            description=t.description,
            args_schema=t.args_schema,
            inner=t,
            client=client,
            async_client=async_client,
            budget_tokens=budget_tokens,
            strategy=strategy,
            fields=(fields or {}).get(t.name),
        )
        for t in items
    ]
