"""Context packs: the memory that matters for a goal, grouped by facet for action.

``compile_context`` checks what the caller may see, derives the query, asks the retrieval
repository for ranked, gated candidates (one SQL statement; see store/retrieval.py and the
numbers in domain/ranking.py), then ``PackBuilder`` turns the rows into items with reasons,
orders the facet sections for the intent, renders the markdown within its token budget and
writes the audit row.

Layers:
    wake         the session-start working set (8 items by default, 1-50): never
                 relevance-gated, built from per-facet quotas over the namespace chain, the
                 goal optional and only re-ranking within the quotas; sections in the fixed
                 WAKE_FACETS order; byte-stable. The rules: domain/wake.py.
    recall       the working set (24 by default), each item with its one-hop neighbours.
    deep_search  up to 50, twice the candidates, and the graph step: neighbours of the
                 ranked items join the pack on their parent's credit.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service import metrics
from service.config import Settings
from service.domain import audit as audit_service
from service.domain import ranking, wake
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.facets import FACET_TITLES, FACETS, INTENT_FACETS, WAKE_FACETS, facet_of
from service.domain.namespaces import parse_namespace
from service.domain.pack_markdown import (
    RenderedPack,
    count_noun,
    fit_empty,
    render_empty,
    render_empty_wake,
    render_pack,
)
from service.domain.redaction.fields import check_identifiers, redact_fields
from service.domain.temporal import goal_periods
from service.embedding import AsyncEmbedder
from service.schemas.context import (
    ContextItem,
    ContextQuality,
    ContextRelated,
    ContextRequest,
    ContextResponse,
    ContextSection,
)
from service.store.retrieval import (
    SCOPE_COUNT_CAP,
    RankedPack,
    RankedRow,
    RetrievalRepository,
    Scope,
)
from service.store.wake import WakeRow

# How much of the goal the audit row keeps (after redaction).
AUDIT_GOAL_CHARS = 500


def _quality(row: RankedRow | WakeRow, expires_at: datetime | None) -> ContextQuality:
    """Where an item comes from and how fresh it is, as a pack item shows it."""
    return ContextQuality(
        origin=row.origin,
        source=row.source,
        url=row.url,
        created_at=row.created_at,
        updated_at=row.updated_at,
        valid_at=row.valid_at,
        project_id=row.project,
        expires_at=expires_at,
    )


class PackBuilder:
    """Builds the response of one call from the rows SQL ranked."""

    def __init__(self, req: ContextRequest, query: str, count_tokens: Any) -> None:
        self.req = req
        self.query = query
        self.count_tokens = count_tokens
        self.intent_facets = INTENT_FACETS.get(req.intent, ())

    def reason(self, row: RankedRow, facet: str) -> str:
        """Why ``row`` is in the pack, in words."""
        if row.via_id is not None:
            return f"related to {row.via_id} via {row.via_relationship}"
        text = self.match_reason(row.matched, row.cosine)
        if facet in self.intent_facets and row.prior > 1.0:
            text += f"; {row.type} prioritised for {self.req.intent} intent"
        if self.req.domain is not None and row.domain == self.req.domain:
            text += f"; in domain '{row.domain}'"
        return text

    def match_reason(self, matched: list[str], cosine: float | None) -> str:
        """What the goal matched in an item: its terms (as the goal wrote them), its cosine."""
        parts: list[str] = []
        if matched:
            phrases = ranking.matched_phrases(self.query, matched) or matched
            parts.append("matched goal terms " + ", ".join(f"'{p}'" for p in phrases[:4]))
        if cosine is not None:
            parts.append(f"semantic {cosine:.2f}")
        return " + ".join(parts) or "matched the goal"

    def item(self, row: RankedRow) -> ContextItem:
        facet = facet_of(row.type)
        return ContextItem(
            id=row.id,
            type=row.type,
            name=row.name,
            content=row.content,
            score=round(row.score, 4),
            facet=facet,
            reason=self.reason(row, facet),
            source=row.source,
            namespace=row.namespace,
            quality=_quality(row, row.expires_at),
            metadata=row.metadata,
            related=[ContextRelated(**r, distance=1) for r in row.related],
        )

    def wake_item(self, row: WakeRow, pulled: bool) -> ContextItem:
        """A wake pack's item: its facet is its wake group; the reason says why it is in
        the working set and what the goal matched, if it is a match (``pulled``: the goal
        moved it forward)."""
        facet = wake.WAKE_GROUPS[row.group].facet
        reason = wake.wake_reason(facet, row.namespace)
        score = 0.0
        if row.goal_score is not None:
            why = self.match_reason(row.matched, row.cosine)
            if self.req.domain is not None and row.domain == self.req.domain:
                why += f"; in domain '{row.domain}'"
            moved = "; pulled forward by the goal" if pulled else ""
            reason = f"{why}{moved}; {reason}"
            score = round(row.goal_score, 4)
        return ContextItem(
            id=row.id,
            type=row.type,
            name=row.name,
            content=row.content,
            score=score,
            facet=facet,
            reason=reason,
            source=row.source,
            namespace=row.namespace,
            quality=_quality(row, None),
            metadata=row.metadata,
            related=[],
        )

    def sections(self, items: list[ContextItem]) -> list[ContextSection]:
        """Facet sections in display order.

        wake: WAKE_FACETS order, items in the order the wake statement picked them
        (byte-stable). Otherwise: the intent's facets first, in the intent's order; the
        others by their best score; items by score, then id."""
        by_facet: dict[str, list[ContextItem]] = {}
        for item in items:
            by_facet.setdefault(item.facet, []).append(item)
        if self.req.layer == "wake":
            order = [f for f in WAKE_FACETS if f in by_facet]
        else:
            for facet_items in by_facet.values():
                facet_items.sort(key=lambda i: (-i.score, str(i.id)))
            first = [f for f in self.intent_facets if f in by_facet]
            rest = sorted(
                (f for f in by_facet if f not in first),
                key=lambda f: (-by_facet[f][0].score, FACETS.index(f) if f in FACETS else 99),
            )
            order = first + rest
        return [
            ContextSection(facet=f, title=FACET_TITLES.get(f, f), items=by_facet[f]) for f in order
        ]

    def wake_hint(self, total: int, result: wake.WakeResult, rendered: RenderedPack) -> str:
        """What an agent should do with a wake pack, and which case an empty one is."""
        in_scope = result.selection.in_scope
        if total == 0:
            if not in_scope:
                return (
                    "Empty because nothing is stored yet: this namespace and its ancestors "
                    "hold no memory within your key's reach. Start without memory context, "
                    "and remember what you learn."
                )
            return (
                f"Empty although the scope is not: {count_noun(in_scope, 'memory', 'memories')}"
                " in this namespace and its ancestors, none of them wake material (superseded, "
                "finished tasks, or kinds a wake pack leaves out such as ideas). Call "
                "`context` with a goal to search them."
            )
        hint = (
            f"Inject `markdown` ({rendered.tokens} tokens) at the start of the session: "
            f"{count_noun(total, 'item')} of the working set of {self.req.namespace} (in-flight "
            "work, binding rules, standing decisions, gotchas, procedures, user preferences, "
            "recent work), filled facet by facet."
        )
        if self.req.goal is None:
            pass
        elif result.goal_used:
            matched = result.selection.matched
            hint += f" The goal matched {count_noun(matched, 'item')} of the working set; " + (
                "it comes first in its section."
                if matched == 1
                else "they come first in their sections."
            )
        elif result.selection.matched:
            hint += (
                " The goal matched most of the scope, so it was taken as generic: this is the "
                "default working set."
            )
        else:
            hint += " The goal matched nothing specific: this is the default working set."
        hint += self._trim_note(rendered)
        hint += " Use item ids to supersede or forget memories."
        return hint + (
            " A wake pack is byte-stable for the same store: keep it in a cached prompt prefix."
        )

    @staticmethod
    def _trim_note(rendered: RenderedPack) -> str:
        note = ""
        if rendered.omitted:
            note += (
                f" {count_noun(rendered.omitted, 'lower-ranked item')} did not fit the "
                "markdown budget: trimmed from `markdown`, "
                f"{'it is' if rendered.omitted == 1 else 'they are'} still in `sections`."
            )
        if rendered.cut:
            note += " The one item shown had its content cut to fit the markdown budget."
        return note

    def usage_hint(
        self, total: int, gated_out: int, rendered: RenderedPack, has_artifacts: bool
    ) -> str:
        if total == 0:
            if gated_out:
                every = (
                    "the only candidate in scope fell"
                    if gated_out == 1
                    else f"all {gated_out} candidates in scope fell"
                )
                return (
                    f"Nothing relevant: {every} below the "
                    "relevance floor, so the pack is empty rather than padded with noise. "
                    "Proceed without memory context, and remember what you learn."
                )
            return (
                "Nothing relevant: no memory in this scope matches the goal. Proceed without "
                "memory context, and remember what you learn."
            )
        hint = (
            f"Inject `markdown` ({rendered.tokens} tokens) into the agent's prompt; sections "
            f"are ordered for the {self.req.intent} intent and each item says why it was "
            "chosen. Use item ids to supersede or forget memories."
        )
        if has_artifacts:
            hint += (
                " Artifacts are references: fetch only the fields you need with "
                "GET /v1/artifacts/{artifact_id}?fields=a,b."
            )
        hint += self._trim_note(rendered)
        return hint


def _scope(
    caller: Caller, req: ContextRequest, visible: list[str], types: list[str] | None
) -> Scope:
    return Scope(
        org_id=caller.org_id,
        namespaces=visible,
        project=req.project,
        key_projects=list(caller.projects),
        agent_id=req.agent_id,
        include_superseded=req.include_superseded,
        types=types,
    )


def _request_summary(req: ContextRequest, limit: int) -> dict[str, Any]:
    """What the audit row keeps of the request: the inputs, with goal and domain already
    redacted (see compile_context) and the goal cut."""
    return {
        "goal": None if req.goal is None else req.goal[:AUDIT_GOAL_CHARS],
        "intent": req.intent,
        "layer": req.layer,
        "limit": limit,
        "retrieval": req.retrieval,
        "domain": req.domain,
        "project": req.project,
        "agent_id": req.agent_id,
        "include_related": req.include_related,
        "related_limit": req.related_limit,
        "markdown_token_budget": req.markdown_token_budget,
        "include_superseded": req.include_superseded,
    }


async def compile_context(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    ctx: AuditContext,
    req: ContextRequest,
) -> ContextResponse:
    """Compile the context pack for ``req`` and audit the call.

    Args:
        session: the call's unit of work (the audit row is written in it).
        embedder: embeds the derived query (not called for ``retrieval="lexical"``).
        caller: whose org, namespaces and projects bound what the pack may hold.
        ctx: the call's audit context.
        req: the validated request.

    Returns:
        The pack: facet sections, markdown within the budget, ``gated_out``, ``audit_id``.

    Raises:
        PermissionDenied: the key lacks read, or may not use the namespace (403
            ``namespace_access_denied``) or the project (403 ``Project access denied``).
    """
    caller.require("read")
    ctx.namespace = parse_namespace(req.namespace)
    limit = req.limit or ranking.DEFAULT_LIMITS[req.layer]
    # Scope first, content after: a key refused here costs no text work, and its failed
    # call's audit row holds no goal.
    ctx.request = {"intent": req.intent, "layer": req.layer, "limit": limit}
    visible = caller.visible_namespaces(req.namespace)
    check_identifiers({"project": req.project, "agent_id": req.agent_id})
    caller.check_project(req.project)
    # The goal and domain are redacted once, off the event loop, and the redacted text is
    # what the query, the markdown, the response and the audit row use: stored memories
    # hold placeholders where the goal held secrets, so nothing is lost for retrieval.
    redacted, _ = await asyncio.to_thread(redact_fields, {"goal": req.goal, "domain": req.domain})
    req = req.model_copy(update=redacted)
    ctx.request = _request_summary(req, limit)
    if req.layer == "wake":
        return await _compile_wake(session, embedder, settings, caller, ctx, req, limit, visible)

    assert req.goal is not None  # the schema requires it outside wake
    texts = ranking.goal_query(req.goal, req.domain)
    query = texts.query
    scope = _scope(caller, req, visible, None)
    repo = RetrievalRepository(session)
    # One after the other: overlapping the model with the scope probe gained nothing
    # measurable on two cores (the model's two threads take both).
    vector = await embedder.embed_query(texts.vector) if req.retrieval != "lexical" else None
    scope_rows = await repo.scope_size(scope, SCOPE_COUNT_CAP)
    plan = ranking.build_plan(
        ranking.PlanInputs(
            mode=req.retrieval,
            layer=req.layer,
            intent=req.intent,
            query=texts.lexical,
            query_vector=vector,
            limit=limit,
            domain=req.domain,
            include_related=req.include_related,
            related_limit=req.related_limit,
            periods=goal_periods(req.goal),
        ),
        settings,
    )
    ranked: RankedPack = await repo.rank(scope, plan, scope_rows)

    builder = PackBuilder(req, query, embedder.count_tokens)
    goal: str = req.goal

    def build() -> tuple[list[ContextSection], RenderedPack]:
        items = [builder.item(row) for row in ranked.rows]
        sections = builder.sections(items)
        if items:
            return sections, render_pack(
                req.goal,
                req.intent,
                req.layer,
                sections,
                req.markdown_token_budget,
                embedder.count_tokens,
            )
        return sections, fit_empty(
            render_empty(goal, req.intent, req.layer, ranked.gated_out),
            req.markdown_token_budget,
            embedder.count_tokens,
        )

    # Tokenizing and rendering a pack of large items is CPU work on request data: a worker
    # thread, never the event loop (50 items of 8 KB held /readyz for 0.45 s).
    sections, rendered = await asyncio.to_thread(build)
    ordered = [item for section in sections for item in section.items]
    return await _finish(
        session,
        ctx,
        req,
        query,
        sections,
        rendered,
        gated_out=ranked.gated_out,
        details={"candidates": ranked.candidates, "scope_rows": ranked.scope_rows},
        usage_hint=builder.usage_hint(
            len(ordered), ranked.gated_out, rendered, any(i.facet == "artifacts" for i in ordered)
        ),
    )


async def _compile_wake(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    caller: Caller,
    ctx: AuditContext,
    req: ContextRequest,
    limit: int,
    visible: list[str],
) -> ContextResponse:
    """The wake layer of ``compile_context`` (rules: domain/wake.py)."""
    query = ranking.derive_query(req.goal, req.domain) if req.goal else ""
    result = await wake.select_wake(
        session,
        embedder,
        settings,
        _scope(caller, req, visible, None),
        namespace=req.namespace,
        goal_query=query or None,
        retrieval=req.retrieval,
        limit=limit,
    )
    builder = PackBuilder(req, query, embedder.count_tokens)

    def build() -> tuple[list[ContextSection], RenderedPack]:
        picked = [builder.wake_item(row, result.goal_used) for row in result.selection.rows]
        sections = builder.sections(picked)
        if picked:
            return sections, render_pack(
                req.goal,
                req.intent,
                req.layer,
                sections,
                req.markdown_token_budget,
                embedder.count_tokens,
                ranked=[item.id for item in picked],
            )
        return sections, fit_empty(
            render_empty_wake(req.goal, req.intent, result.selection.in_scope),
            req.markdown_token_budget,
            embedder.count_tokens,
        )

    sections, rendered = await asyncio.to_thread(build)  # off the loop, as _compile's
    return await _finish(
        session,
        ctx,
        req,
        query,
        sections,
        rendered,
        gated_out=0,
        details={
            "candidates": result.selection.matched,
            "scope_rows": result.selection.in_scope,
            "wake": {
                "qualified": result.selection.qualified,
                "goal_matches": result.selection.matched,
                "goal_used": result.goal_used,
            },
        },
        usage_hint=builder.wake_hint(len(result.selection.rows), result, rendered),
    )


async def _finish(
    session: AsyncSession,
    ctx: AuditContext,
    req: ContextRequest,
    query: str,
    sections: list[ContextSection],
    rendered: RenderedPack,
    *,
    gated_out: int,
    details: dict[str, Any],
    usage_hint: str,
) -> ContextResponse:
    """Metrics, the audit row and the response of a compiled pack."""
    ordered = [item for section in sections for item in section.items]
    metrics.observe_pack(len(ordered), rendered.tokens)
    metrics.count_gated_out(gated_out)
    audit_id = await audit_service.record(
        session,
        ctx,
        outcome="ok",
        status_code=200,
        memory_ids=[item.id for item in ordered],
        details={
            "items": [{"id": str(i.id), "score": i.score, "facet": i.facet} for i in ordered],
            "total_items": len(ordered),
            "gated_out": gated_out,
            **details,
            "markdown_tokens": rendered.tokens,
            "markdown_omitted": rendered.omitted,
            "query_chars": len(query),
        },
    )
    return ContextResponse(
        goal=req.goal,
        intent=req.intent,
        query=query,
        domain=req.domain,
        project=req.project,
        layer=req.layer,
        namespace=req.namespace,
        retrieval=req.retrieval,
        sections=sections,
        total_items=len(ordered),
        gated_out=gated_out,
        usage_hint=usage_hint,
        markdown=rendered.markdown,
        markdown_tokens=rendered.tokens,
        audit_id=audit_id if audit_id is not None else ctx.audit_id,
    )
