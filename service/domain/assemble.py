"""Assembly of one model call's messages within one token budget (the seed's
``ContextProtocol.prepare_context``, as a service).

Inputs: the system prompt, the user message, a context pack (``memory``: goal and namespace
as POST /v1/context takes them), task state (artifact ids with declared fields, resolved by
``read_artifact`` as GET /v1/artifacts/{id}?fields= does), tool results (each through the
envelope of ``domain/tool_results.py``) and the conversation so far (``messages``).

**Order of the messages** (the seed's assembly order: system, user, memory, task state, tool
results), with the conversation where a chat API needs it::

    system prompt
    history                 the conversation so far, minus the call below
    user message
    memory                  (a system message: the pack's markdown)
    task state              (a system message: each artifact's summary and declared fields)
    assistant tool_calls    the message the tool results answer (added when none is given)
    tool results            one tool message per call, in the order of the calls

Every tool message follows the assistant message that called it, so the sequence stays valid
for the API: a tool message in ``messages`` must answer a call of the assistant message
before it, and every call must be answered exactly once, by a tool message there or by a
tool result (422 naming the message otherwise). When no message calls the tool results, one
assistant message calling them (``arguments: "{}"``) is added and ``synthesized_tool_call``
says so.

**Budget.** Tokens are counted with the context pack's tokenizer; a message costs its
content, its tool calls' JSON and ``MESSAGE_OVERHEAD``. When the whole is over budget, the
least valuable layer is cut first. We follow the seed's *priorities*, not its assembly
order: order is for the model's reading, priority for what to lose. ``CUT_ORDER``:

1. **history**, oldest first, whole turns at a time (an assistant message with its tool
   messages is one turn): the user message restates the current turn, and the seed ranks
   history lowest (priority 3);
2. **memory** (seed priority 2): the pack is rendered into what is left, its lowest-ranked
   items left out first (``render_pack``), or dropped when fewer than ``MIN_LAYER_TOKENS``
   remain: it is background, relevant but optional;
3. **task state** (priority 1): the declared fields are shortened like a JSON tool result,
   or dropped when no room is left: the upstream declared what this call needs;
4. **tool results** (priority 1, last): they answer the call the model made; each is
   trimmed, never dropped, in proportion to its size down to ``MIN_BUDGET_TOKENS``, and keeps
   its ``tool_call_id``.

The system prompt and the user message are never cut (422 ``budget_tokens`` if they alone
exceed the budget), but they are redacted like everything else; so are the history's
contents and tool-call arguments.

**Bounded text work.** Before any scan, the text the call will redact, check and count (the
system prompt, the user message, every message's content and tool-call ids, names and
arguments, every tool result with its identifiers, the pack's goal) is checked against ``max_scanned_bytes`` as one total
(``domain/scan_bound.py``: 413 naming ``tool_results.0.result`` when one part alone is over,
else the top-level field holding the most, such as ``messages``); the task state, once read,
is checked again with it (``task_state``). Redaction, token counts and trimming run in worker
threads, never on the event loop.

**Audit.** One ``assemble`` row: layer token counts, cuts, each tool result's name, sizes and
redaction labels and counts; never content. The context pack and each artifact read leave
their own rows, as over their own endpoints (the pack's is replayable), marked
``details.part_of`` with the assemble row's id.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import audit as audit_service
from service.domain import tool_results as envelopes
from service.domain.artifacts import read_artifact
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.domain.context import compile_context
from service.domain.redaction import merge_counts
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.scan_bound import Part, check_scan_bound
from service.embedding import AsyncEmbedder
from service.errors import InvalidInput, NotFound
from service.schemas.assemble import (
    AssembleCut,
    AssembleRequest,
    AssembleResponse,
    ChatMessage,
    Layer,
    LayerReport,
    ToolResultReport,
)
from service.schemas.tool_results import MIN_BUDGET_TOKENS, ToolResultRequest

MESSAGE_OVERHEAD = 4
"""Tokens counted per message for the chat format's own framing (role, separators)."""
MIN_LAYER_TOKENS = 48
"""Below this many tokens of room, memory and task state are dropped rather than shrunk."""
CUT_ORDER: tuple[Layer, ...] = ("history", "memory", "task_state", "tool_results")
LAYERS: tuple[Layer, ...] = ("system", "user", "history", "memory", "task_state", "tool_results")
MEMORY_HEADER = "[Memory: what earlier sessions learned that bears on this goal]\n"
TASK_HEADER = (
    "[Task state: artifacts by reference; read more fields with "
    "GET /v1/artifacts/{id}?fields=a,b]\n"
)

Message = dict[str, Any]


@dataclass
class _Plan:
    """The conversation split for assembly (see ``plan_conversation``)."""

    turns: list[list[Message]]
    call: Message | None
    answered: list[Message]
    order: list[str]
    synthesized: bool = False


@dataclass
class _Budget:
    count: envelopes.TokenCounter
    layers: dict[str, LayerReport] = field(default_factory=dict)
    cuts: list[AssembleCut] = field(default_factory=list)
    # Token counts by message identity: every message is counted once, in a worker thread
    # (``prime``), never on the event loop. The message is kept with its count, so its id is
    # never reused by another message while the budget lives.
    known: dict[int, tuple[Message, int]] = field(default_factory=dict)

    def tokens(self, message: Message) -> int:
        cached = self.known.get(id(message))
        if cached is not None:
            return cached[1]
        n = envelopes.count_long(message.get("content") or "", self.count) + MESSAGE_OVERHEAD
        if message.get("tool_calls"):
            n += self.count(json.dumps(message["tool_calls"], ensure_ascii=False))
        self.known[id(message)] = (message, n)
        return n

    def prime(self, messages: list[Message]) -> None:
        for message in messages:
            self.tokens(message)

    def total(self, messages: list[Message]) -> int:
        return sum(self.tokens(m) for m in messages)

    def report(self, layer: Layer, kept: list[Message], requested: int, status: str) -> None:
        self.layers[layer] = LayerReport(
            layer=layer,
            tokens=self.total(kept),
            requested_tokens=requested,
            messages=len(kept),
            status=status,
        )

    def cut(self, layer: Layer, action: str, what: str, saved: int, reason: str) -> None:
        self.cuts.append(
            AssembleCut(
                layer=layer,
                action=action,
                what=what,
                tokens_saved=max(0, saved),
                reason=reason,
            )
        )


def _message(m: ChatMessage) -> Message:
    out: Message = {"role": m.role, "content": m.content}
    if m.name is not None:
        out["name"] = m.name
    if m.tool_calls:
        out["tool_calls"] = [c.model_dump() for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def plan_conversation(messages: list[ChatMessage], results: list[ToolResultRequest]) -> _Plan:
    """Split ``messages`` into droppable turns and the assistant message the tool results
    answer; check that every tool message answers a call and every call is answered once.

    Raises:
        InvalidInput: 422 naming the message or tool result that breaks the sequence.
    """
    ids = [r.tool_call_id for r in results]
    for n, call_id in enumerate(ids):
        if call_id in ids[:n]:
            raise InvalidInput(f"tool_results.{n}.tool_call_id", f"{call_id} is given twice")
    pending = set(ids)
    turns: list[list[Message]] = []
    open_calls: list[str] = []
    opener = -1
    for i, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id not in open_calls:
                raise InvalidInput(
                    f"messages.{i}.tool_call_id",
                    "a tool message must follow the assistant message that called it, "
                    f"once: no pending call {m.tool_call_id}",
                )
            if m.tool_call_id in pending:
                raise InvalidInput(
                    f"tool_results.{ids.index(m.tool_call_id)}.tool_call_id",
                    f"{m.tool_call_id} is answered in messages too",
                )
            open_calls.remove(m.tool_call_id)
            turns[-1].append(_message(m))
            continue
        if open_calls:
            if set(open_calls) <= pending:
                raise InvalidInput(
                    f"messages.{i}",
                    f"the tool results answer the assistant message at messages.{opener}: "
                    "only its tool messages may follow it",
                )
            raise InvalidInput(
                f"messages.{opener}.tool_calls",
                f"call {open_calls[0]} has no tool message or tool result",
            )
        turns.append([_message(m)])
        if m.tool_calls:
            open_calls = [c.id for c in m.tool_calls]
            opener = i
    call: Message | None = None
    answered: list[Message] = []
    order: list[str] = []
    synthesized = False
    if open_calls:
        if set(open_calls) != pending:
            missing = [c for c in open_calls if c not in pending]
            if missing:
                raise InvalidInput(
                    f"messages.{opener}.tool_calls",
                    f"call {missing[0]} has no tool message or tool result",
                )
            extra = next(n for n, c in enumerate(ids) if c not in open_calls)
            raise InvalidInput(
                f"tool_results.{extra}.tool_call_id",
                f"the last assistant message does not call {ids[extra]}",
            )
        last = turns.pop()
        call, answered = last[0], last[1:]
        order = [c["id"] for c in call["tool_calls"] if c["id"] in pending]
    elif results:
        for n, r in enumerate(results):
            if any(r.tool_call_id == c.id for m in messages for c in m.tool_calls or []):
                raise InvalidInput(
                    f"tool_results.{n}.tool_call_id",
                    f"{r.tool_call_id} is answered in messages already",
                )
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": r.tool_call_id,
                    "type": "function",
                    "function": {"name": r.tool_name, "arguments": "{}"},
                }
                for r in results
            ],
        }
        order = ids
        synthesized = True
    return _Plan(turns=turns, call=call, answered=answered, order=order, synthesized=synthesized)


def _redact_conversation(
    system: str | None, user: str | None, plan: _Plan
) -> tuple[str | None, str | None, dict[str, int]]:
    """Redact the system prompt, the user message and every message's content and tool-call
    arguments in place (one pass of the write paths' redactor)."""
    messages = [m for turn in plan.turns for m in turn] + plan.answered
    if plan.call is not None:
        messages.append(plan.call)
    fields: dict[str, Any] = {"system": system, "user": user}
    for n, m in enumerate(messages):
        fields[f"m{n}"] = m.get("content")
        for k, c in enumerate(m.get("tool_calls") or []):
            fields[f"m{n}.{k}"] = c["function"]["arguments"]
    redacted, counts = redact_fields(fields)
    for n, m in enumerate(messages):
        m["content"] = redacted[f"m{n}"]
        for k, c in enumerate(m.get("tool_calls") or []):
            c["function"]["arguments"] = redacted[f"m{n}.{k}"]
    return redacted["system"], redacted["user"], counts


def _fit_tools(
    results: list[ToolResultRequest], room: int, count: envelopes.TokenCounter
) -> tuple[list[tuple[envelopes.Envelope, list[str], int]], bool]:
    """Each tool result through the envelope at its own budget; when they exceed ``room``,
    again at budgets in proportion to their sizes (never below ``MIN_BUDGET_TOKENS``).
    Returns the envelopes with their missing fields and budgets, and whether they fit."""
    done = [(*envelopes.process(r, count), r.budget_tokens) for r in results]
    need = sum(e.tokens_after + MESSAGE_OVERHEAD for e, _, _ in done)
    if need <= room:
        return done, True
    avail = room - MESSAGE_OVERHEAD * len(results)
    total = sum(e.tokens_after for e, _, _ in done) or 1
    out = []
    for r, (env, _, _) in zip(results, done, strict=True):
        budget = max(MIN_BUDGET_TOKENS, min(r.budget_tokens, avail * env.tokens_after // total))
        out.append((*envelopes.process(r, count, budget), budget))
    fits = sum(e.tokens_after + MESSAGE_OVERHEAD for e, _, _ in out) <= room
    return out, fits


SCAN_HINT = (
    "send fewer or shorter messages and tool results (each tool result can be cut by "
    "POST /v1/tool-results first), or declare fewer task-state fields"
)


def scanned_parts(req: AssembleRequest) -> list[Part]:
    """What one assemble call redacts and counts of its request, by field path, for
    ``check_scan_bound``."""
    parts: list[Part] = [("system", req.system), ("user_message", req.user_message)]
    for n, m in enumerate(req.messages):
        parts.append((f"messages.{n}.content", m.content))
        for k, c in enumerate(m.tool_calls or []):
            where = f"messages.{n}.tool_calls.{k}"
            parts.append((f"{where}.id", c.id))
            parts.append((f"{where}.function.name", c.function.name))
            parts.append((f"{where}.function.arguments", c.function.arguments))
    for n, r in enumerate(req.tool_results):
        parts += envelopes.scanned_parts(r, f"tool_results.{n}.")
    if req.memory is not None:
        parts += [("memory.goal", req.memory.goal), ("memory.domain", req.memory.domain)]
    return parts


async def assemble(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    ctx: AuditContext,
    req: AssembleRequest,
) -> AssembleResponse:
    """POST /v1/assemble: the messages of one model call within ``budget_tokens``, and the
    budget report (see the module docstring); audit the call.

    Raises:
        ScopeDenied: the key has no read scope.
        InvalidInput: the sequence is not valid for a chat API, an identifier holds a
            secret, or the system prompt and user message alone exceed the budget.
        NotFound: a task-state artifact is not within the key's reach.
        PayloadTooLarge: the text to scan is over ``max_scanned_bytes`` (413 naming the
            field: ``tool_results.0.result``, ``messages``, ``task_state``).
    """
    caller.require("read")
    limit = settings.max_scanned_bytes
    parts = scanned_parts(req)
    identifiers = envelopes.identifiers_of(req.tool_results, "tool_results.")
    for n, m in enumerate(req.messages):
        for k, c in enumerate(m.tool_calls or []):
            identifiers[f"messages.{n}.tool_calls.{k}.id"] = c.id
            identifiers[f"messages.{n}.tool_calls.{k}.function.name"] = c.function.name
    if req.memory is not None:
        # the pack's namespace (domain/namespaces.py:parse_namespace refuses it there too,
        # but a pack cut for room never gets that far)
        identifiers["memory.namespace"] = req.memory.namespace

    def check_text() -> None:
        # The bound first: up to 64,000 tool calls' ids and names are checked for secrets too.
        check_scan_bound(parts, limit, SCAN_HINT)
        check_identifiers(identifiers)

    await asyncio.to_thread(check_text)
    ctx.request = {
        "budget_tokens": req.budget_tokens,
        "messages": len(req.messages),
        "tool_results": len(req.tool_results),
        "task_state": len(req.task_state),
        "memory": req.memory is not None,
    }
    plan = plan_conversation(req.messages, req.tool_results)
    count = embedder.count_tokens
    budget = _Budget(count)
    # The task state is read first, so its text counts toward the bound before any scan.
    task_text: str | None = None
    if req.task_state:
        entries = await _task_state(session, caller, ctx, req)
        task_parts = [(f"task_state.{n}", e) for n, e in enumerate(entries)]
        task_text = await asyncio.to_thread(_task_text, entries, [*parts, *task_parts], limit)
    system, user, counts = await asyncio.to_thread(
        _redact_conversation, req.system, req.user_message, plan
    )
    head = [{"role": "system", "content": system}] if system else []
    user_msgs = [{"role": "user", "content": user}] if user else []
    given = [m for turn in plan.turns for m in turn] + plan.answered
    task_head: Message = {"role": "system", "content": TASK_HEADER}
    memory_head: Message = {"role": "system", "content": MEMORY_HEADER}
    await asyncio.to_thread(
        budget.prime,
        [*head, *user_msgs, *given, *([plan.call] if plan.call else []), task_head, memory_head],
    )
    fixed = budget.total(head) + budget.total(user_msgs)
    if fixed > req.budget_tokens:
        raise InvalidInput(
            "budget_tokens",
            f"the system prompt and the user message alone take {fixed} tokens, over "
            f"budget_tokens {req.budget_tokens}; they are never cut",
        )
    budget.report("system", head, budget.total(head), "kept" if head else "absent")
    budget.report("user", user_msgs, budget.total(user_msgs), "kept" if user_msgs else "absent")
    room = req.budget_tokens - fixed

    # Tool results (cut last): the calling message, then the envelopes.
    call_msgs = ([plan.call] if plan.call else []) + plan.answered
    room -= budget.total(call_msgs)
    by_id = {r.tool_call_id: r for r in req.tool_results}
    results = [by_id[i] for i in plan.order]
    fitted, fits = await asyncio.to_thread(_fit_tools, results, room, count)
    if not fits:
        raise InvalidInput(
            "budget_tokens",
            f"budget_tokens {req.budget_tokens} cannot hold the system prompt, the user "
            f"message and {len(results)} tool result(s) at their minimum of "
            f"{MIN_BUDGET_TOKENS} tokens each",
        )
    tool_msgs = [
        {"role": "tool", "tool_call_id": r.tool_call_id, "content": env.content}
        for r, (env, _, _) in zip(results, fitted, strict=True)
    ]
    await asyncio.to_thread(budget.prime, tool_msgs)
    reports: list[ToolResultReport] = []
    tool_details: list[dict[str, Any]] = []
    requested_tools = budget.total(call_msgs)
    for r, (env, missing, used_budget) in zip(results, fitted, strict=True):
        counts = merge_counts(counts, env.redactions)
        requested_tools += min(env.tokens_before, r.budget_tokens) + MESSAGE_OVERHEAD
        if used_budget < r.budget_tokens and env.tokens_before > used_budget:
            budget.cut(
                "tool_results",
                "trimmed",
                f"{r.tool_name} ({r.tool_call_id}) to {used_budget} of {r.budget_tokens} tokens",
                min(env.tokens_before, r.budget_tokens) - env.tokens_after,
                "tool results are cut last, each in proportion to its size, never dropped",
            )
        reports.append(
            ToolResultReport(
                tool_call_id=r.tool_call_id,
                tool_name=r.tool_name,
                strategy=env.strategy,
                budget_tokens=used_budget,
                tokens_before=env.tokens_before,
                tokens_after=env.tokens_after,
                cuts=env.cuts,
                missing_fields=missing,
                redactions=envelopes.redaction_list(env.redactions),
            )
        )
        tool_details.append(envelopes.audit_details(r, env))
    room -= budget.total(tool_msgs)
    tools_all = call_msgs + tool_msgs
    trimmed_tools = any(c.layer == "tool_results" for c in budget.cuts)
    budget.report(
        "tool_results",
        tools_all,
        requested_tools,
        "absent" if not tools_all else "trimmed" if trimmed_tools else "kept",
    )

    # Task state (cut third).
    task_msgs: list[Message] = []
    if task_text is not None:
        text = task_text
        whole = {"role": "system", "content": TASK_HEADER + text}
        requested = await asyncio.to_thread(budget.tokens, whole)
        if requested <= room:
            task_msgs = [whole]
            budget.report("task_state", task_msgs, requested, "kept")
        elif room - budget.tokens(task_head) >= MIN_LAYER_TOKENS:
            inner = room - budget.tokens(task_head)
            shorter = await asyncio.to_thread(_shrink_json, text, inner, count)
            task_msgs = [{"role": "system", "content": TASK_HEADER + shorter}]
            await asyncio.to_thread(budget.prime, task_msgs)
            if budget.total(task_msgs) > room:
                task_msgs = []
        if not task_msgs and requested > room:
            budget.report("task_state", [], requested, "dropped")
            budget.cut(
                "task_state",
                "dropped",
                f"{len(req.task_state)} artifact(s)",
                requested,
                "no room left after the tool results (task state is cut before them)",
            )
        elif requested > room:
            budget.report("task_state", task_msgs, requested, "trimmed")
            budget.cut(
                "task_state",
                "trimmed",
                "the declared fields' values, shortened",
                requested - budget.total(task_msgs),
                "over budget: task state is cut after history and memory, before tool results",
            )
        room -= budget.total(task_msgs)
    else:
        budget.report("task_state", [], 0, "absent")

    # Memory (cut second).
    memory_msgs: list[Message] = []
    memory_audit_id = None
    if req.memory is not None:
        header = budget.tokens(memory_head)
        wanted = req.memory.markdown_token_budget
        pack_budget = min(wanted, room - header)
        if pack_budget < MIN_LAYER_TOKENS:
            budget.report("memory", [], wanted + header, "dropped")
            budget.cut(
                "memory",
                "dropped",
                "the context pack",
                wanted + header,
                "no room left after tool results and task state (memory is cut second)",
            )
        else:
            sub = ctx.part(AuditAction.CONTEXT)
            pack = await compile_context(
                session,
                embedder,
                settings,
                caller,
                sub,
                req.memory.model_copy(update={"markdown_token_budget": pack_budget}),
            )
            memory_audit_id = pack.audit_id
            if not pack.total_items:
                budget.report("memory", [], 0, "empty")
            else:
                memory_msgs = [{"role": "system", "content": MEMORY_HEADER + pack.markdown}]
                await asyncio.to_thread(budget.prime, memory_msgs)
                shown = sum(len(s.items) for s in pack.sections)
                trimmed = pack_budget < wanted and pack.markdown_tokens >= pack_budget - 64
                budget.report(
                    "memory",
                    memory_msgs,
                    budget.total(memory_msgs),
                    "trimmed" if trimmed else "kept",
                )
                if trimmed:
                    budget.cut(
                        "memory",
                        "trimmed",
                        f"the pack's markdown to {pack_budget} of {wanted} tokens "
                        f"({shown} items ranked; the lowest-ranked left out first)",
                        0,
                        "over budget: memory is cut after history",
                    )
        room -= budget.total(memory_msgs)
    else:
        budget.report("memory", [], 0, "absent")

    # History (cut first): whole turns, newest kept first.
    kept_turns: list[list[Message]] = []
    dropped_msgs = 0
    dropped_tokens = 0
    for turn in reversed(plan.turns):
        cost = budget.total(turn)
        if dropped_msgs == 0 and cost <= room:
            kept_turns.append(turn)
            room -= cost
        else:
            dropped_msgs += len(turn)
            dropped_tokens += cost
    kept_turns.reverse()
    history = [m for turn in kept_turns for m in turn]
    if dropped_msgs:
        budget.cut(
            "history",
            "dropped",
            f"the {dropped_msgs} oldest message(s) of the conversation",
            dropped_tokens,
            "over budget: history is cut first, oldest whole turns first",
        )
    budget.report(
        "history",
        history,
        budget.total(history) + dropped_tokens,
        "absent"
        if not plan.turns
        else "dropped"
        if not history
        else "trimmed"
        if dropped_msgs
        else "kept",
    )

    messages = head + history + user_msgs + memory_msgs + task_msgs + call_msgs + tool_msgs
    used = budget.total(messages)
    layer_reports = [budget.layers[name] for name in LAYERS]
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="ok",
        status_code=200,
        details={
            "used_tokens": used,
            "layers": {r.layer: {"tokens": r.tokens, "status": r.status} for r in layer_reports},
            "cuts": [
                {"layer": c.layer, "action": c.action, "tokens_saved": c.tokens_saved}
                for c in budget.cuts
            ],
            "tool_results": tool_details,
            "redactions": dict(sorted(counts.items())),
            "synthesized_tool_call": plan.synthesized,
        },
        redaction_count=sum(counts.values()),
    )
    return AssembleResponse(
        messages=messages,
        budget_tokens=req.budget_tokens,
        used_tokens=used,
        utilisation=round(used / req.budget_tokens, 4),
        tokenizer=envelopes.tokenizer_name(embedder),
        message_overhead=MESSAGE_OVERHEAD,
        layers=layer_reports,
        cuts=sorted(budget.cuts, key=lambda c: CUT_ORDER.index(c.layer)),
        cut_order=list(CUT_ORDER),
        tool_results=reports,
        redactions=envelopes.redaction_list(counts),
        synthesized_tool_call=plan.synthesized,
        memory_audit_id=memory_audit_id,
        audit_id=audit_id,
    )


async def _task_state(
    session: AsyncSession, caller: Caller, ctx: AuditContext, req: AssembleRequest
) -> list[dict[str, Any]]:
    """Each artifact's name, summary and declared fields, resolved as the artifacts API does
    (each read audited, ``part_of`` this call)."""
    entries: list[dict[str, Any]] = []
    for n, ref in enumerate(req.task_state):
        sub = ctx.part(AuditAction.ARTIFACT)
        fields = ",".join(ref.fields) if ref.fields else None
        try:
            got = await read_artifact(session, caller, sub, ref.artifact_id, fields, ref.namespace)
        except NotFound as exc:
            raise NotFound(exc.message, field=f"task_state.{n}.artifact_id") from None
        except InvalidInput as exc:
            field_name = exc.details.get("field", "fields")
            raise InvalidInput(f"task_state.{n}.{field_name}", exc.message) from None
        entry: dict[str, Any] = {
            "artifact_id": str(got.artifact_id),
            "name": got.name,
            "summary": got.summary,
        }
        if ref.fields:
            entry["fields"] = got.fields
            if got.missing:
                entry["missing"] = got.missing
        else:
            entry["body"] = got.body
        entries.append(entry)
    return entries


def _task_text(entries: list[dict[str, Any]], parts: list[Part], limit: int) -> str:
    """The task state as one JSON object per line (in a worker thread), once the call's text
    with it (``parts``) is within the bound."""
    check_scan_bound(parts, limit, SCAN_HINT)
    return "\n".join(envelopes.dumps(envelopes.finite(e)) for e in entries)


def _shrink_json(text: str, budget: int, count: envelopes.TokenCounter) -> str:
    """Task state's lines as one JSON array, shortened to ``budget`` like a JSON tool result
    (keys kept, long values shortened)."""
    value = [json.loads(line) for line in text.split("\n") if line]
    env = envelopes.build_envelope(value, budget, count, strategy="json")
    return env.content
