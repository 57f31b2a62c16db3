"""Wake packs: the working set an agent must not start a session without.

A wake pack is asked for at session start, before the agent knows much about what comes
next; its goal is generic ("resume work") or absent. So it is never relevance-gated: it is
built from the call's namespace chain (own namespace and ancestors, the same scope rules as
every pack) by per-facet quotas, and a goal only re-orders within them.

Groups, in priority order (``WAKE_GROUPS``; each is a section of the pack):

    active_work    what is in flight: tasks, then plans; a task or plan whose
                   ``metadata.status`` is closed (done, finished, cancelled...) is not, and
                   neither is one superseded (remember its outcome with ``supersedes``)
    constraints    the rules that bind: constraints and rules
    decisions      the decisions that stand (superseded ones are out, as in every pack)
    gotchas        the gotchas of this scope
    procedures     procedures, then patterns
    preferences    the user's lasting preferences: memories stored at the user level itself
                   (``alice``): claims and domain notes (lasting statements) before
                   episodes and sessions (events)
    recent_memory  the most recent work: episodes, sessions, verifications and artifacts
                   below the user level (the session and the task)

Ideas, and claims or domain notes below the user level, are not wake material (ask
``context`` for them).

Quotas: the slots go round robin over the groups in priority order, one per group per
round, and a group with nothing left passes its turn. With the default limit of 8 and every
group stocked, each group gets one slot and active_work a second; with fewer groups stocked,
the others get more. Within a group: the goal's matches first (by relevance), then type
priority (tasks before plans, procedures before patterns, claims and domain notes before
episodes among preferences, the others equal), then recency
(the UTC day of ``created_at``, newest first), then the namespace's closeness to the call
(task before session before user), then the exact ``created_at``, then id. Recency counts
in days so that closeness decides among the same day's memories: the session's decision of
this morning before the user-level one written a minute ago. Every key is stored data: the same store and the same call
give the same pack, byte for byte, goal or no goal; the time of the call plays no part.

The goal: scored as every pack scores (the same hybrid relevance, store/retrieval.py), on
the qualifying memories only and inside the wake statement itself (store/wake.py: one round
trip, no ranking pass over the scope), and a match must be semantic (cosine at or above the
relevance floor; the lexical share at or above its minimum in lexical mode). A
word shared by accident ("start of session" and a pytest gotcha about session fixtures,
cosine 0.20) passes the gate's lexical route but does not reorder a working set. A match is pulled
forward within its group; it never leaves its group or changes the quotas, so a goal never
empties a pack nor shrinks a section. Whether a goal is generic is decided by what it
matches: a goal that matches nothing leaves the default order, and one that matches more
than ``GENERIC_MATCH_SHARE`` of the qualifying memories tells nothing apart and is treated
as generic too. No word list is involved.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from sqlalchemy.ext.asyncio import AsyncSession

from service.config import Settings
from service.domain import ranking
from service.embedding import AsyncEmbedder
from service.store.retrieval import Mode, RankingPlan, Scope
from service.store.wake import WakePlan, WakeRepository, WakeSelection


@dataclass(frozen=True)
class WakeGroup:
    """One section of a wake pack: the types it takes, where they must live, and a rank per
    type (lower first; equal ranks leave the order to recency)."""

    facet: str
    types: tuple[tuple[str, int], ...]
    # "any": every namespace of the chain; "user": the user level only; "below": not it.
    level: str
    why: str


WAKE_GROUPS: tuple[WakeGroup, ...] = (
    WakeGroup("active_work", (("task", 0), ("plan", 1)), "any", "in flight"),
    WakeGroup("constraints", (("constraint", 0), ("rule", 0)), "any", "a rule that binds"),
    WakeGroup("decisions", (("decision", 0),), "any", "a decision that stands"),
    WakeGroup("gotchas", (("gotcha", 0),), "any", "a gotcha of this scope"),
    WakeGroup("procedures", (("procedure", 0), ("pattern", 1)), "any", "a procedure"),
    WakeGroup(
        "preferences",
        (("claim", 0), ("domain", 0), ("episode", 1), ("session", 1)),
        "user",
        "a lasting user-level preference",
    ),
    WakeGroup(
        "recent_memory",
        (("episode", 0), ("session", 0), ("verification", 0), ("artifact", 0)),
        "below",
        "recent work",
    ),
)
# Tasks and plans with one of these ``metadata.status`` values (case-insensitive) are not in
# flight. A status vocabulary, not a goal word list: it is what agents write into a field.
CLOSED_STATUSES: tuple[str, ...] = (
    "done",
    "finished",
    "completed",
    "complete",
    "closed",
    "cancelled",
    "canceled",
    "abandoned",
    "resolved",
)
OPEN_ONLY_TYPES: tuple[str, ...] = ("task", "plan")
# A goal matching more than this share of the qualifying memories is treated as generic.
GENERIC_MATCH_SHARE = 0.5
# At most this many goal matches are looked at (more than any wake pack holds).
MATCH_LIMIT = 200
LEVELS = ("user", "session", "task")


def wake_types() -> list[str]:
    """Every memory type some wake group takes."""
    seen: list[str] = []
    for group in WAKE_GROUPS:
        for memory_type, _ in group.types:
            if memory_type not in seen:
                seen.append(memory_type)
    return seen


def build_wake_plan(namespace: str, limit: int, matches: dict[uuid.UUID, float]) -> WakePlan:
    """The wake statement's plan for a call at ``namespace``.

    Args:
        namespace: the call's namespace; its first segment is the user level.
        limit: the most items in the pack.
        matches: the goal's matches and their relevance (empty: no goal, or a generic one).
    """
    types = wake_types()
    at_user: list[int | None] = [None] * len(types)
    below: list[int | None] = [None] * len(types)
    rank_at_user = [0] * len(types)
    rank_below = [0] * len(types)
    for index, group in enumerate(WAKE_GROUPS):
        for memory_type, type_rank in group.types:
            i = types.index(memory_type)
            if group.level in ("any", "user"):
                at_user[i] = index
                rank_at_user[i] = type_rank
            if group.level in ("any", "below"):
                below[i] = index
                rank_below[i] = type_rank
    ordered = sorted(matches.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return WakePlan(
        types=types,
        group_at_user=at_user,
        group_below_user=below,
        type_rank_at_user=rank_at_user,
        type_rank_below_user=rank_below,
        open_only_types=list(OPEN_ONLY_TYPES),
        closed_statuses=list(CLOSED_STATUSES),
        user_namespace=namespace.split(":", 1)[0],
        limit=limit,
        boost_ids=[k for k, _ in ordered],
        boost_relevance=[round(v, 6) for _, v in ordered],
    )


@dataclass
class WakeResult:
    selection: WakeSelection
    # True when the goal re-ranked the pack (it matched, and not too broadly).
    goal_used: bool


async def select_wake(
    session: AsyncSession,
    embedder: AsyncEmbedder,
    settings: Settings,
    scope: Scope,
    *,
    namespace: str,
    goal_query: str | None,
    retrieval: Mode,
    limit: int,
) -> WakeResult:
    """The wake pack's memories for a call at ``namespace`` within ``scope``, in one
    statement, goal or no goal.

    Args:
        session: the call's session.
        embedder: embeds the goal (not called without one, nor for lexical retrieval).
        scope: what the caller may see (types are ignored: the wake groups decide).
        goal_query: the derived query of the goal, or None.
        retrieval: hybrid, lexical or vector, as for every pack.
        limit: the most items.

    Returns:
        The selection in pick order (each row with what the goal matched in it), and
        whether the goal re-ranked.
    """
    plan = build_wake_plan(namespace, limit, {})
    if goal_query:
        plan = replace(
            plan,
            goal=await _goal_plan(embedder, settings, goal_query, retrieval),
            match_limit=MATCH_LIMIT,
            generic_share=GENERIC_MATCH_SHARE,
        )
    selection = await WakeRepository(session).select(scope, plan)
    # The statement applied the same test: the goal re-orders when it matched, and not
    # more than GENERIC_MATCH_SHARE of what qualifies (else it tells nothing apart).
    used = 0 < selection.matched <= GENERIC_MATCH_SHARE * selection.qualified
    return WakeResult(selection, goal_used=used)


async def _goal_plan(
    embedder: AsyncEmbedder, settings: Settings, query: str, retrieval: Mode
) -> RankingPlan:
    """How the wake statement scores the goal: the relevance every pack uses (the same
    weights, floors and BM25; no intent prior, no recency), on the qualifying memories."""
    vector = await embedder.embed_query(query) if retrieval != "lexical" else None
    return ranking.build_plan(
        ranking.PlanInputs(
            mode=retrieval,
            layer="wake",
            intent="general",
            query=query,
            query_vector=vector,
            limit=MATCH_LIMIT,
            domain=None,
            include_related=False,
            related_limit=0,
        ),
        settings,
    )


def level_of(namespace: str) -> str:
    """``user``, ``session`` or ``task``: where in the chain ``namespace`` sits."""
    return LEVELS[min(namespace.count(":"), len(LEVELS) - 1)]


def wake_reason(facet: str, namespace: str) -> str:
    """Why a memory is in the wake pack without the goal's help, in words."""
    why = next((g.why for g in WAKE_GROUPS if g.facet == facet), facet)
    return f"wake: {why}, from the {level_of(namespace)} level ({namespace})"
