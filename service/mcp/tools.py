"""The MCP tools: their names, descriptions (read by the model that calls them), input models
and the thin function each runs: validate, call one backend method, shape the result.

Transient context (see README, "MCP"): ``context`` and ``wake`` results are marked
``_meta.context = {lifecycle: "transient", summary}``; a successful ``remember`` answers
``_meta.context = {consumed: true}``, so a client may collapse the last transient result to its
summary once the model has stored what it concluded; ``wake`` registers that pairing in
``_meta.contextHints``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel

from service.mcp.backends import Backend
from service.mcp.inputs import ForgetInput, ListMemoriesInput
from service.mcp.limits import clip_field, dumps, fit_items
from service.mcp.results import ok
from service.schemas.memories import RememberRequest

Run = Callable[[Backend, Any, Any], Awaitable[types.CallToolResult]]

CONSUMED_META: dict[str, Any] = {"context": {"consumed": True}}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    action: str
    """The audit action, the same as the HTTP endpoint's."""
    run: Run
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def to_tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_model.model_json_schema(),
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=False,
            ),
        )


# --- remember -------------------------------------------------------------------------------

REMEMBER_DESCRIPTION = """\
Store one thing a future agent (or you, in a later session) should not have to relearn: a \
decision and its reason, a constraint, a gotcha, a procedure that worked, a verified fact, \
the state of a task. Write it as a self-contained statement; pick the `type` that fits \
(decision, constraint, gotcha, procedure, task, claim, ...) and a `namespace` \
(`user[:session[:task]]`).

Call it when you reach a conclusion worth keeping, typically after analysing what `context` or \
`wake` returned. Do not store raw tool output, logs, fragments or step-by-step reasoning: the \
write gate rejects them (error `gate_rejected` with reason codes and hints). Secrets and \
personal data are redacted before anything is stored.

Returns `{id, status: "created"|"duplicate", name, facet, near_duplicates, redactions, \
warnings}`. An exact duplicate returns the existing id. When `near_duplicates` lists a similar \
memory, consider storing again with `supersedes` set to its id. A successful call marks the \
last `context` result as consumed (`_meta.context.consumed`), so your client may collapse it.
"""


async def _remember(backend: Backend, rc: Any, args: RememberRequest) -> types.CallToolResult:
    result = await backend.remember(rc, args)
    return ok(result.model_dump(mode="json"), meta=CONSUMED_META)


# --- list_memories ----------------------------------------------------------------------------

LIST_DESCRIPTION = """\
Browse stored memories, newest first, filtered by namespace (`alice:s1` exactly, `alice:*` \
the subtree), type, project, agent_id or tag. Use it to review what is stored or to find an \
id (to `forget` it, or to `supersede` it with `remember`). To get what is relevant to a task, \
call `context` instead: it ranks by relevance and fits a budget.

Returns `{offset, limit, total, has_more, next_offset, items}`. Page with `offset`/`limit`. \
The result also stays under `max_bytes` (default 20000): memories past it are left for the next \
page, `truncated` says how many, and `next_offset` is where to continue.
"""


def _memory_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None and v != [] and v != {}}


async def _list_memories(
    backend: Backend, rc: Any, args: ListMemoriesInput
) -> types.CallToolResult:
    page = await backend.list_memories(rc, args)
    items = [_memory_item(m.model_dump(mode="json")) for m in page.items]
    # The page's fields around the items, at their longest, come out of the byte budget.
    widest = {
        "offset": page.offset,
        "limit": page.limit,
        "total": page.total,
        "has_more": False,
        "next_offset": page.offset + page.limit + 1000,
        "items": [],
        "truncated": {
            "reason": "max_bytes",
            "max_bytes": args.max_bytes,
            "items_dropped": len(items),
            "content_clipped": False,
        },
    }
    overhead = len(dumps(widest).encode()) + 8
    fitted = fit_items(
        items, args.max_bytes, clip=lambda i, b: clip_field(i, "content", b), overhead=overhead
    )
    kept = len(fitted.items)
    has_more = page.offset + kept < page.total
    payload: dict[str, Any] = {
        "offset": page.offset,
        "limit": page.limit,
        "total": page.total,
        "has_more": has_more,
        "next_offset": page.offset + kept if has_more else None,
        "items": fitted.items,
    }
    if fitted.dropped or fitted.clipped:
        payload["truncated"] = {
            "reason": "max_bytes",
            "max_bytes": args.max_bytes,
            "items_dropped": fitted.dropped,
            "content_clipped": fitted.clipped,
        }
    return ok(payload)


# --- forget -------------------------------------------------------------------------------------

FORGET_DESCRIPTION = """\
Erase one memory for good: its content, embedding and links are deleted; only its id stays, \
as a tombstone in the audit trail. Use it for memories that are wrong, leaked something \
sensitive, or must go on request. To correct or update a memory, prefer `remember` with \
`supersedes` set to the old id: the history stays readable.

Returns `{id, deleted: true}`. Error `not_found` when the id does not exist or is outside \
your key's reach.
"""


async def _forget(backend: Backend, rc: Any, args: ForgetInput) -> types.CallToolResult:
    result = await backend.forget(rc, args.id)
    return ok(result.model_dump(mode="json"))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="remember",
        title="Remember",
        description=REMEMBER_DESCRIPTION,
        input_model=RememberRequest,
        action="remember",
        run=_remember,
        idempotent=True,
    ),
    ToolSpec(
        name="list_memories",
        title="List memories",
        description=LIST_DESCRIPTION,
        input_model=ListMemoriesInput,
        action="list",
        run=_list_memories,
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="forget",
        title="Forget a memory",
        description=FORGET_DESCRIPTION,
        input_model=ForgetInput,
        action="delete",
        run=_forget,
        destructive=True,
        idempotent=True,
    ),
)
