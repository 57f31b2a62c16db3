"""The SQL of wake packs: the session-start working set of a namespace chain, in one statement.

The rules and numbers live in ``domain/wake.py``; this module applies them::

    pool      every memory of the call's scope (org, namespace chain, project, diary), superseded
              ones included: counted, so an empty pack can say whether the scope is empty
    grouped   each memory's wake group, from its type and whether it lives at the user level
              (two arrays indexed by type); no group: not wake material. Superseded memories
              and closed tasks (``metadata.status``) drop out here
    ranked    row_number() within each group: the goal's relevance first (only for memories
              the goal matched), then type priority, the UTC day of created_at (newest
              first), namespace depth (task before session before user), created_at, id
    picked    ORDER BY rank, group LIMIT n: round robin over the groups in priority order,
              so each group gets its share and a group with nothing left passes its turn

Every ordering key is stored data (or the goal's relevance, computed from stored vectors by
the caller): the same store and the same call give the same rows in the same order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from service.store.retrieval import _MEMORY_COLUMNS, Scope, memory_fields, scope_params, scope_sql


@dataclass(frozen=True)
class WakePlan:
    """What a wake statement selects and how; every value comes from domain/wake.py."""

    types: list[str]
    # Group index (0 = highest priority) per entry of ``types``; None: not wake material.
    group_at_user: list[int | None]
    group_below_user: list[int | None]
    # Rank per entry of ``types`` within its group (lower first), at and below the user level.
    type_rank_at_user: list[int]
    type_rank_below_user: list[int]
    # Types dropped when ``metadata.status`` is one of ``closed_statuses`` (finished tasks).
    open_only_types: list[str]
    closed_statuses: list[str]
    user_namespace: str
    limit: int
    # The goal's matches, with their relevance: pulled forward within their group.
    boost_ids: list[uuid.UUID]
    boost_relevance: list[float]


@dataclass
class WakeRow:
    id: uuid.UUID
    namespace: str
    type: str
    name: str
    content: str
    source: str | None
    origin: str | None
    url: str | None
    project: str | None
    domain: str | None
    agent_id: str | None
    created_at: Any
    updated_at: Any
    valid_at: Any
    metadata: dict[str, Any]
    group: int
    depth: int
    relevance: float | None


@dataclass
class WakeSelection:
    rows: list[WakeRow]
    # Memories of the scope (superseded ones included) and those that may enter a wake pack.
    in_scope: int
    qualified: int
    # Qualifying memories the goal matched.
    matched: int


def build_wake_sql(scope: Scope) -> str:
    """The wake statement for ``scope`` (see the module docstring)."""
    pool_scope = scope_sql("m", replace(scope, include_superseded=True, types=None))
    live = "" if scope.include_superseded else "AND p.superseded_by IS NULL"
    cols = ", ".join(f"m.{c}" for c in _MEMORY_COLUMNS)
    return f"""
    WITH pool AS MATERIALIZED (
        SELECT m.id, m.namespace, m.type, m.created_at, m.superseded_by,
               lower(coalesce(m.metadata->>'status', '')) AS status
        FROM memories m WHERE {pool_scope}),
    typed AS (
        SELECT p.id, p.namespace, p.type, p.created_at, p.status,
               array_position(CAST(:types AS text[]), p.type::text) AS ti,
               length(p.namespace) - length(replace(p.namespace, ':', '')) AS depth
        FROM pool p
        WHERE true {live}),
    grouped AS (
        SELECT t.id, t.created_at, t.depth,
               CASE WHEN t.namespace = :user_ns
                    THEN (CAST(:group_at_user AS int[]))[t.ti]
                    ELSE (CAST(:group_below_user AS int[]))[t.ti] END AS grp,
               CASE WHEN t.namespace = :user_ns
                    THEN (CAST(:rank_at_user AS int[]))[t.ti]
                    ELSE (CAST(:rank_below_user AS int[]))[t.ti] END AS type_rank
        FROM typed t
        WHERE t.ti IS NOT NULL
          AND NOT (t.type = ANY(CAST(:open_only AS text[]))
                   AND t.status = ANY(CAST(:closed AS text[])))),
    qualified AS (
        SELECT g.*, b.rel
        FROM grouped g
        LEFT JOIN unnest(CAST(:boost_ids AS uuid[]), CAST(:boost_rel AS float8[])) AS b(id, rel)
               ON b.id = g.id
        WHERE g.grp IS NOT NULL),
    ranked AS (
        SELECT q.id, q.grp, q.depth, q.rel,
               row_number() OVER (
                   PARTITION BY q.grp
                   ORDER BY q.rel DESC NULLS LAST, q.type_rank,
                            date_trunc('day', q.created_at AT TIME ZONE 'UTC') DESC,
                            q.depth DESC, q.created_at DESC, q.id) AS rn
        FROM qualified q),
    picked AS (
        SELECT * FROM ranked ORDER BY rn, grp LIMIT :lim)
    SELECT c.in_scope, c.qualified, c.matched, p.grp, p.depth, p.rel, p.rn, {cols}
    FROM (SELECT (SELECT count(*) FROM pool) AS in_scope,
                 (SELECT count(*) FROM qualified) AS qualified,
                 (SELECT count(*) FROM qualified WHERE rel IS NOT NULL) AS matched) c
    LEFT JOIN (picked p JOIN memories m ON m.org_id = :org AND m.id = p.id) ON true
    ORDER BY p.rn, p.grp"""


class WakeRepository:
    """The read side of wake packs, bound to one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def select(self, scope: Scope, plan: WakePlan) -> WakeSelection:
        """The wake pack's memories in selection order (the first ``limit`` of the round
        robin), plus the scope's counts."""
        params: dict[str, Any] = {
            **scope_params(replace(scope, types=None)),
            "types": plan.types,
            "group_at_user": plan.group_at_user,
            "group_below_user": plan.group_below_user,
            "rank_at_user": plan.type_rank_at_user,
            "rank_below_user": plan.type_rank_below_user,
            "open_only": plan.open_only_types,
            "closed": plan.closed_statuses,
            "user_ns": plan.user_namespace,
            "boost_ids": plan.boost_ids,
            "boost_rel": plan.boost_relevance,
            "lim": plan.limit,
        }
        result = await self.session.execute(text(build_wake_sql(scope)), params)
        rows: list[WakeRow] = []
        in_scope = qualified = matched = 0
        for r in result.mappings().all():
            in_scope, qualified, matched = (
                int(r["in_scope"]),
                int(r["qualified"]),
                int(r["matched"]),
            )
            if r["id"] is None:
                continue
            rows.append(
                WakeRow(
                    **memory_fields(r),
                    group=int(r["grp"]),
                    depth=int(r["depth"]),
                    relevance=None if r["rel"] is None else float(r["rel"]),
                )
            )
        return WakeSelection(rows=rows, in_scope=in_scope, qualified=qualified, matched=matched)
