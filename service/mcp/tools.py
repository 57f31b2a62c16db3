"""The MCP tools: their names, descriptions (read by the model that calls them), input models
and how each shapes its answer. A tool runs its operation (service/operations.py) through the
backend's one entry, ``Backend.run``, on the arguments its input model stands for
(``request()``, where the input adds what only MCP has: text limits, a confirmation).

Transient context (see README, "MCP"): ``context`` and ``wake`` results are marked
``_meta.context = {lifecycle: "transient", summary}``; a successful ``remember`` answers
``_meta.context = {consumed: true}``, so a client may collapse the last transient result to its
summary once the model has stored what it concluded; ``wake`` registers that pairing in
``_meta.contextHints``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel

from service import operations
from service.domain.audit import AuditAction
from service.domain.pack_markdown import count_noun
from service.mcp.backends import Backend, RequestContext
from service.mcp.inputs import (
    ContextInput,
    EraseNamespaceInput,
    ForgetInput,
    ListMemoriesInput,
    RecallArtifactInput,
    WakeInput,
)
from service.mcp.limits import clip_field, dumps, fit_items, limit_text
from service.mcp.results import ok
from service.operations import Operation
from service.schemas.artifacts import ArtifactFields
from service.schemas.assemble import AssembleRequest
from service.schemas.context import ContextResponse
from service.schemas.memories import MemoryPage, RememberRequest, RememberResponse
from service.schemas.tool_results import ToolResultRequest, ToolResultResponse

Shape = Callable[[Any, Any], types.CallToolResult]
"""How a tool answers: from the operation's answer and the tool's validated arguments."""

CONSUMED_META: dict[str, Any] = {"context": {"consumed": True}}
CONTEXT_HINTS: list[dict[str, Any]] = [
    {"tool": "context", "lifecycle": "transient", "consumedBy": "remember"},
    {"tool": "wake", "lifecycle": "transient", "consumedBy": "remember"},
]
SUMMARY_IDS = 5


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its operation (service/operations.py: name, audit action, hints, arguments and
    domain call) declared once, plus what only MCP has: a title and a description written for
    models, the input model and how the answer is shaped (default: the answer as JSON)."""

    operation: Operation[Any, Any]
    title: str
    description: str
    input_model: type[BaseModel]
    shape: Shape | None = None

    async def run(
        self, backend: Backend, rc: RequestContext, args: BaseModel
    ) -> types.CallToolResult:
        """Run the operation on what ``args`` stand for, and shape its answer."""
        to_request = getattr(args, "request", None)
        request = to_request() if callable(to_request) else args
        answer = await backend.run(rc, self.operation, request)
        if self.shape is None:
            return ok(answer.model_dump(mode="json"))
        return self.shape(answer, args)

    @property
    def name(self) -> str:
        return self.operation.name

    @property
    def action(self) -> AuditAction:
        """The audit action, the same as the HTTP endpoint's."""
        return self.operation.action

    @property
    def read_only(self) -> bool:
        return self.operation.read_only

    @property
    def destructive(self) -> bool:
        return self.operation.destructive

    @property
    def idempotent(self) -> bool:
        return self.operation.idempotent

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

Give a `key` (your name for the memory, unique in the namespace) to write it idempotently: \
writing the key again replaces its memory (status `updated`, `superseded_id` the old one, kept \
as history); the same content again is `duplicate`.

Returns `{id, status: "created"|"updated"|"duplicate", name, facet, near_duplicates, \
redactions, warnings}`. An exact duplicate returns the existing id. When `near_duplicates` lists a similar \
memory, consider storing again with `supersedes` set to its id. If your key is limited to \
projects, set `project`: shared (project-less) memories are read-only to such a key. A successful call marks the \
last `context` result as consumed (`_meta.context.consumed`), so your client may collapse it.
"""


def _remember(result: RememberResponse, args: RememberRequest) -> types.CallToolResult:
    return ok(result.model_dump(mode="json"), meta=CONSUMED_META)


# --- list_memories ----------------------------------------------------------------------------

LIST_DESCRIPTION = """\
Browse stored memories, newest first, filtered by namespace (`alice:s1` exactly, `alice:*` \
the subtree), type, project, agent_id or tag. Use it to review what is stored or to find an \
id (to `forget` it, or to replace it: `remember` with `supersedes` set to it). To get what is relevant to a task, \
call `context` instead: it ranks by relevance and fits a budget.

Returns `{offset, limit, total, has_more, next_offset, items}`. Page with `offset`/`limit`. \
The result also stays under `max_bytes` (default 20000): memories past it are left for the next \
page, `truncated` says how many, and `next_offset` is where to continue.
"""


def _memory_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None and v != [] and v != {}}


def _list_memories(page: MemoryPage, args: ListMemoriesInput) -> types.CallToolResult:
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
`supersedes` set to the old id, in the old memory's namespace: the history stays \
readable.

Returns `{id, deleted: true}`. Error `not_found` when the id does not exist or is outside \
your key's reach; `project_access_denied` when your key may read it but not change it (a \
shared memory, for a key limited to projects).
"""



# --- erase_namespace ---------------------------------------------------------------------------

ERASE_DESCRIPTION = """\
Erase a namespace and everything under it, for good: a whole user (`alice`), a session \
(`alice:s1`) or a task. Its memories (content and embeddings), their links in and out, its \
artifacts and the keys limited to it are deleted in one transaction; audit rows keep only ids. \
Use it only when asked to erase a person or a session: it cannot be undone. Set `confirm` to \
the same namespace. Needs a write key whose namespaces cover it.

Returns the deletion receipt `{namespace, erased: {memories, relations, artifacts, keys, \
audit_rows_scrubbed}, erased_at, audit_id}`.
"""



# --- context and wake -----------------------------------------------------------------------

CONTEXT_DESCRIPTION = """\
Get the memory that matters for what you are about to do: a context pack for a goal, with \
the relevant decisions, constraints, gotchas, procedures, active work and artifacts grouped \
by facet, the sections your `intent` needs first (build, debug, plan, decide, research, ...). \
Call it before starting or resuming a task, and whenever you need what is known about a \
topic. Describe the goal in a sentence and give the `namespace` you work in \
(`user[:session[:task]]`): the pack draws on it and its ancestors only.

Returns the pack as markdown, then the id of each item (to `forget` it, or to replace it with \
`remember` + `supersedes`). Irrelevant memories are left out (`gated_out`); when nothing \
relevant is stored the pack says so: do not retry with the same goal. Size: \
`markdown_token_budget` (default 4000 tokens) bounds the pack; `max_bytes`, `head` and `tail` \
cut the returned text further, and say so in a closing `[truncated: ...]` line.

The result is transient (`_meta.context.lifecycle`): once you have used it, typically by \
storing your conclusion with `remember`, your client may collapse it to its one-line summary.
"""

WAKE_DESCRIPTION = """\
Call once at the start of a session (or after a break) to recall where things stand: the \
working set of your `namespace` and its ancestors, never empty while anything qualifies. It \
holds what is in flight (open tasks and plans), the rules that bind, the decisions that \
stand, gotchas, procedures, the user's lasting preferences and the most recent work, filled \
facet by facet up to `limit` items (default 8, at most 50). `goal` is optional: give what the \
session is about (the user's first request) and related memories come first in their \
sections; nothing is left out for being unrelated. The same store and call give the same \
bytes, so it is cheap to repeat. Mid-task, call `context` instead.

Returns the pack as markdown, then the id of each item. `max_bytes`, `head` and `tail` cut \
the returned text, saying so in a closing `[truncated: ...]` line. Like `context`, the result \
is transient, and it registers the pairing in `_meta.contextHints`: `context` and `wake` \
results are consumed by `remember`.
"""


def _summary(pack: ContextResponse) -> str:
    ids = [str(item.id) for section in pack.sections for item in section.items]
    items = count_noun(pack.total_items, "item")
    if pack.goal is None:
        text = f"{items}, no goal ({pack.layer} pack at {pack.namespace})"
    else:
        goal = " ".join(pack.goal.split())
        goal = goal if len(goal) <= 80 else goal[:79] + "…"
        text = f"{items} for goal '{goal}' ({pack.layer} pack at {pack.namespace})"
    if not ids:
        empty = "nothing in scope qualifies" if pack.layer == "wake" else "nothing relevant stored"
        return f"{text}: {empty}"
    more = f", +{len(ids) - SUMMARY_IDS} more" if len(ids) > SUMMARY_IDS else ""
    return f"{text}, ids {', '.join(ids[:SUMMARY_IDS])}{more}"


def _pack_text(pack: ContextResponse) -> str:
    """The markdown, then one line per item with its id: the markdown carries no ids (it is
    byte-stable for prompt caches) and the model needs them to supersede or forget."""
    items = [item for section in pack.sections for item in section.items]
    if not items:
        return pack.markdown
    lines = [f"- {item.id} ({item.type}) {' '.join(item.name.split())[:80]}" for item in items]
    return pack.markdown.rstrip("\n") + "\n\n## Item ids\n" + "\n".join(lines) + "\n"


def _pack_result(
    pack: ContextResponse, args: ContextInput, extra_meta: dict[str, Any]
) -> types.CallToolResult:
    limited = limit_text(_pack_text(pack), head=args.head, tail=args.tail, max_bytes=args.max_bytes)
    payload: dict[str, Any] = {
        "goal": pack.goal,
        "intent": pack.intent,
        "layer": pack.layer,
        "namespace": pack.namespace,
        "query": pack.query,
        "total_items": pack.total_items,
        "gated_out": pack.gated_out,
        "usage_hint": pack.usage_hint,
        "markdown_tokens": pack.markdown_tokens,
        "audit_id": str(pack.audit_id) if pack.audit_id else None,
        "items": [
            {"id": str(i.id), "facet": i.facet, "type": i.type, "name": i.name, "score": i.score}
            for section in pack.sections
            for i in section.items
        ],
        "text": limited.text,
        "truncated": limited.truncated,
    }
    if limited.truncation is not None:
        payload["truncation"] = limited.truncation.model_dump()
    meta = {"context": {"lifecycle": "transient", "summary": _summary(pack)}, **extra_meta}
    return ok(payload, text=limited.text, meta=meta)


def _context(pack: ContextResponse, args: ContextInput) -> types.CallToolResult:
    return _pack_result(pack, args, {})


def _wake(pack: ContextResponse, args: WakeInput) -> types.CallToolResult:
    return _pack_result(pack, args, {"contextHints": CONTEXT_HINTS})


# --- recall_artifact ----------------------------------------------------------------------------

RECALL_ARTIFACT_DESCRIPTION = """\
Read the fields you need from an artifact: a JSON object or list (test results, a schema, a \
report) that context packs show only as a summary, `(artifact <id>)` and its `Fields:`. \
Name the fields to read rather than fetching the whole body: each is taken from the object, \
or from the first list item that has it; `missing` lists those the artifact lacks.

Returns `{artifact_id, name, summary, size_bytes, schema_keys, fields, missing}` as indented \
JSON (`body` instead of `fields` when none were named). The result stays under `max_bytes` \
(default 20000); `head`/`tail` keep the first or last lines; a closing `[truncated: ...]` line \
says what was cut. Error `not_found` when the id is unknown or outside your key's reach.
"""

_ARTIFACT_BODY = ("fields", "body")


def _recall_artifact(artifact: ArtifactFields, args: RecallArtifactInput) -> types.CallToolResult:
    unused = {"body"} if args.fields else {"fields", "missing"}
    whole = artifact.model_dump(mode="json", exclude=unused)
    # Indented, so that head/tail count meaningful lines; one space keeps it lean.
    text = json.dumps(whole, ensure_ascii=False, indent=1)
    limited = limit_text(text, head=args.head, tail=args.tail, max_bytes=args.max_bytes)
    if limited.truncation is None:
        return ok({**whole, "truncated": False}, text=text)
    # The cut JSON no longer parses: structured content keeps the metadata and the cut text.
    payload = {k: v for k, v in whole.items() if k not in _ARTIFACT_BODY}
    payload.update(truncated=True, truncation=limited.truncation.model_dump(), text=limited.text)
    return ok(payload, text=limited.text)


# --- tool_result and assemble -----------------------------------------------------------------

TOOL_RESULT_DESCRIPTION = """\
Pass a tool's raw output through the envelope before you (or another model) read it: secrets \
and personal data are redacted first, then the output is trimmed to `budget_tokens` (default \
800). Logs keep their first and last lines and every line that carries an error (tracebacks, \
ERROR, FAILED, exit codes), with a marker where lines were dropped; JSON stays valid JSON: \
long arrays keep their first items and the items that carry errors and say how many were \
dropped, long strings are shortened, keys are kept. Name `fields` (dotted paths such as \
`items.status.phase`) to keep only those, or set `strategy: summary` for the shape alone.

Returns the tool message `{role: "tool", tool_call_id, content}` with `tokens_before`, \
`tokens_after`, `cuts` (what was dropped, and why), `missing_fields`, `redactions` (labels and \
counts, never the values) and `audit_id`. The text of the result is `content` itself. A \
result over the server's `max_scanned_bytes` (1 MiB by default; JSON counted compact) is \
refused with `payload_too_large`: cut it or send it in parts.
"""

ASSEMBLE_DESCRIPTION = """\
Build the messages of one model call within one token budget, in OpenAI chat format: the \
`system` prompt, the conversation so far (`messages`), the `user_message`, a context pack \
(`memory`: goal and namespace, as `context` takes them), task state (`task_state`: artifact \
ids and the fields needed) and `tool_results` (each through the `tool_result` envelope), each \
tool message right after the assistant message that called it.

Over budget, the least valuable layer is cut first: the oldest history, then memory, then \
task state; tool results are trimmed last and never dropped. The system prompt and the user \
message are never cut (error `validation_error` on `budget_tokens` when they alone exceed it) \
but are redacted. All the text together (prompts, messages, tool results, task state) must \
stay within the server's `max_scanned_bytes` (1 MiB by default), else `payload_too_large` \
naming the field. Returns `{messages, used_tokens, utilisation, layers, cuts, cut_order, \
tool_results, redactions, audit_id}`.
"""


def _tool_result(result: ToolResultResponse, args: ToolResultRequest) -> types.CallToolResult:
    return ok(result.model_dump(mode="json"), text=result.content)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        operation=operations.WAKE,
        title="Wake up",
        description=WAKE_DESCRIPTION,
        input_model=WakeInput,
        shape=_wake,
    ),
    ToolSpec(
        operation=operations.CONTEXT,
        title="Get context for a goal",
        description=CONTEXT_DESCRIPTION,
        input_model=ContextInput,
        shape=_context,
    ),
    ToolSpec(
        operation=operations.REMEMBER,
        title="Remember",
        description=REMEMBER_DESCRIPTION,
        input_model=RememberRequest,
        shape=_remember,
    ),
    ToolSpec(
        operation=operations.RECALL_ARTIFACT,
        title="Read an artifact's fields",
        description=RECALL_ARTIFACT_DESCRIPTION,
        input_model=RecallArtifactInput,
        shape=_recall_artifact,
    ),
    ToolSpec(
        operation=operations.LIST_MEMORIES,
        title="List memories",
        description=LIST_DESCRIPTION,
        input_model=ListMemoriesInput,
        shape=_list_memories,
    ),
    ToolSpec(
        operation=operations.FORGET,
        title="Forget a memory",
        description=FORGET_DESCRIPTION,
        input_model=ForgetInput,
    ),
    ToolSpec(
        operation=operations.ERASE_NAMESPACE,
        title="Erase a namespace",
        description=ERASE_DESCRIPTION,
        input_model=EraseNamespaceInput,
    ),
    ToolSpec(
        operation=operations.TOOL_RESULT,
        title="Trim and redact a tool result",
        description=TOOL_RESULT_DESCRIPTION,
        input_model=ToolResultRequest,
        shape=_tool_result,
    ),
    ToolSpec(
        operation=operations.ASSEMBLE,
        title="Assemble a model call's messages",
        description=ASSEMBLE_DESCRIPTION,
        input_model=AssembleRequest,
    ),
)
