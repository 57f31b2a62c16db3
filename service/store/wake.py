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

With a goal (``WakePlan.goal``), the same statement scores it, only where a wake pack can
use it: the qualifying memories, which are few (a goal only re-orders within the chain's
wake material). For them it computes the pack statement's relevance (store/retrieval.py):
cosine to the goal's vector, the BM25 lexical share (its statistics from the full-text hits
among the scope's wake-type memories, N the memories of the scope's namespaces, as the pack
statement counts them for a narrow scope), relevance = w * cosine + (1 - w) * share times
the intent's type prior. A match: cosine at or above the relevance floor (the share at or
above the minimum in lexical mode), the best ``match_limit`` of them. The generic test
(matches over ``generic_share`` of the qualifying memories) is decided in the statement
too, so a goal costs no second round trip: the boosts apply only when it passes.

Every ordering key is stored data (or the goal's relevance, computed from stored vectors):
the same store and the same call give the same rows in the same order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from service.store.retrieval import (
    MEMORY_COLUMNS,
    SCOPE_N_SQL,
    RankingPlan,
    Scope,
    bm25_ctes,
    matched_by_idf,
    memory_fields,
    scope_params,
    scope_rows_sql,
    statement,
)
from service.store.vectors import vector_literal


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
    # A goal scored in the statement (its mode, query, vector, weights, floors and type
    # priors; the candidate, limit, recency and graph fields are not read), at most
    # ``match_limit`` matches, generic above ``generic_share`` of the qualifying memories.
    goal: RankingPlan | None = None
    match_limit: int = 0
    generic_share: float = 1.0


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
    # The relevance that ordered it within its group (None: not pulled forward).
    relevance: float | None
    # What the goal matched in it (statement-scored goals only): cosine (None in lexical
    # mode), lexical share, matched lexemes, and its relevance when it is a match.
    cosine: float | None = None
    lexical: float = 0.0
    matched: list[str] = field(default_factory=list)
    goal_score: float | None = None


@dataclass
class WakeSelection:
    rows: list[WakeRow]
    # Memories of the scope (superseded ones included) and those that may enter a wake pack.
    in_scope: int
    qualified: int
    # Qualifying memories the goal matched.
    matched: int


def _goal_ctes(goal: RankingPlan) -> list[str]:
    """The CTEs that score ``goal`` on the qualifying memories (``base``): ``goal_scored``
    (id, cosine, lexical, matched lexemes, score, is_match)."""
    use_vec = goal.mode in ("hybrid", "vector")
    use_lex = goal.mode in ("hybrid", "lexical")
    ctes: list[str] = []
    if use_lex:
        # The pack statement's BM25 (store/retrieval.py, narrow path), its hits taken from
        # the scope's wake-type memories.
        ctes.append(
            """q AS (
            SELECT tsvector_to_array(to_tsvector('english', :qtext)) AS terms,
                   replace(plainto_tsquery('english', :qtext)::text, '&', '|')::tsquery AS tsq)"""
        )
        ctes.append(
            """hits AS MATERIALIZED (
            SELECT t.id, t.tsv, length(t.tsv)::float8 AS len
            FROM typed t, q
            WHERE t.ti IS NOT NULL AND t.tsv @@ q.tsq)"""
        )
        ctes += bm25_ctes(SCOPE_N_SQL)
    cosine = "1 - b.dist" if use_vec else "NULL::float8"
    lexical = "coalesce(l.share, 0)" if use_lex else "0::float8"
    matched = "coalesce(l.matched, '{}'::text[])" if use_lex else "'{}'::text[]"
    lex_join = "LEFT JOIN lex l ON l.id = b.id" if use_lex else ""
    ctes.append(
        f"""goal_raw AS MATERIALIZED (
        SELECT b.id, b.type, {cosine} AS cosine, {lexical} AS lexical, {matched} AS matched
        FROM base b {lex_join})"""
    )
    if goal.mode == "hybrid":
        relevance, is_match = ":vw * r.cosine + (1 - :vw) * r.lexical", "r.cosine >= :floor"
    elif goal.mode == "vector":
        relevance, is_match = "r.cosine", "r.cosine >= :floor"
    else:
        relevance, is_match = "r.lexical", "r.lexical >= :min_share"
    prior = (
        "coalesce((CAST(:prior_weights AS float8[]))"
        "[array_position(CAST(:prior_types AS text[]), r.type::text)], 1.0)"
    )
    ctes.append(
        f"""goal_scored AS (
        SELECT s.*, s.is_match AND row_number() OVER (
                   PARTITION BY s.is_match ORDER BY s.score DESC, s.id) <= :match_limit AS hit
        FROM (SELECT r.id, r.cosine, r.lexical, r.matched,
                     ({relevance}) * {prior} AS score, coalesce({is_match}, false) AS is_match
              FROM goal_raw r) s)"""
    )
    return ctes


def build_wake_sql(scope: Scope, plan: WakePlan | None = None) -> str:
    """The wake statement for ``scope`` (see the module docstring); ``plan`` tells whether
    it scores a goal, and how."""
    pool_scope = replace(scope, include_superseded=True, types=None)
    live = "" if scope.include_superseded else "AND p.superseded_by IS NULL"
    cols = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
    goal = plan.goal if plan is not None else None
    # A goal's inputs are read with the chain's rows, in the one pass over them: the
    # distance to the goal's vector (cast once, an InitPlan) and the full-text vector.
    extra: list[str] = []
    if goal is not None and goal.mode in ("hybrid", "vector"):
        extra.append("dist")
    if goal is not None and goal.mode in ("hybrid", "lexical"):
        extra.append("tsv")
    read = {"dist": "m.embedding <=> (SELECT CAST(:qvec AS vector)) AS dist", "tsv": "m.tsv"}
    pool_extra = "".join(f", {read[c]}" for c in extra)
    typed_extra = "".join(f", p.{c}" for c in extra)
    grouped_extra = "".join(f", t.{c}" for c in ["type", *extra]) if goal is not None else ""
    pool_columns = (
        "m.id, m.namespace, m.type, m.created_at, m.superseded_by,"
        f" lower(coalesce(m.metadata->>'status', '')) AS status{pool_extra}"
    )
    head = f"""
    WITH pool AS MATERIALIZED (
        SELECT m.* FROM {scope_rows_sql(pool_scope, pool_columns)}),
    typed AS (
        SELECT p.id, p.namespace, p.type, p.created_at, p.status,
               array_position(CAST(:types AS text[]), p.type::text) AS ti,
               length(p.namespace) - length(replace(p.namespace, ':', '')) AS depth{typed_extra}
        FROM pool p
        WHERE true {live}),
    grouped AS (
        SELECT t.id, t.created_at, t.depth{grouped_extra},
               CASE WHEN t.namespace = :user_ns
                    THEN (CAST(:group_at_user AS int[]))[t.ti]
                    ELSE (CAST(:group_below_user AS int[]))[t.ti] END AS grp,
               CASE WHEN t.namespace = :user_ns
                    THEN (CAST(:rank_at_user AS int[]))[t.ti]
                    ELSE (CAST(:rank_below_user AS int[]))[t.ti] END AS type_rank
        FROM typed t
        WHERE t.ti IS NOT NULL
          AND NOT (t.type = ANY(CAST(:open_only AS text[]))
                   AND t.status = ANY(CAST(:closed AS text[])))),"""
    if goal is None:
        middle = """
    qualified AS (
        SELECT g.*, b.rel, b.rel AS boost,
               NULL::float8 AS cosine, 0::float8 AS lexical, '{}'::text[] AS matched
        FROM grouped g
        LEFT JOIN unnest(CAST(:boost_ids AS uuid[]), CAST(:boost_rel AS float8[])) AS b(id, rel)
               ON b.id = g.id
        WHERE g.grp IS NOT NULL),"""
    else:
        # rel: the goal's relevance of a match; boost: the same when the goal is not
        # generic (what orders the groups).
        middle = (
            """
    base AS MATERIALIZED (SELECT g.* FROM grouped g WHERE g.grp IS NOT NULL),
    """
            + ",\n    ".join(_goal_ctes(goal))
            + """,
    scored AS (
        SELECT b.*, CASE WHEN s.hit THEN round(s.score::numeric, 6)::float8 END AS rel,
               s.cosine, s.lexical, s.matched
        FROM base b JOIN goal_scored s ON s.id = b.id),
    verdict AS (
        SELECT count(*) FILTER (WHERE rel IS NOT NULL) > 0
               AND count(*) FILTER (WHERE rel IS NOT NULL) <= :generic_share * count(*) AS used
        FROM scored),
    qualified AS (
        SELECT s.*, CASE WHEN v.used THEN s.rel END AS boost
        FROM scored s CROSS JOIN verdict v),"""
        )
    # A lexically scored goal's matched lexemes, rarest first, for the picked few only.
    lexical = goal is not None and goal.mode in ("hybrid", "lexical")
    matched = matched_by_idf("p.matched") if lexical else "p.matched"
    tail = f"""
    ranked AS (
        SELECT q.id, q.grp, q.depth, q.rel, q.boost, q.cosine, q.lexical, q.matched,
               row_number() OVER (
                   PARTITION BY q.grp
                   ORDER BY q.boost DESC NULLS LAST, q.type_rank,
                            date_trunc('day', q.created_at AT TIME ZONE 'UTC') DESC,
                            q.depth DESC, q.created_at DESC, q.id) AS rn
        FROM qualified q),
    picked AS (
        SELECT * FROM ranked ORDER BY rn, grp LIMIT :lim)
    SELECT c.in_scope, c.qualified, c.matched AS n_matched, p.grp, p.depth, p.rel, p.boost,
           p.cosine, p.lexical, {matched} AS matched, p.rn, {cols}
    FROM (SELECT (SELECT count(*) FROM pool) AS in_scope,
                 (SELECT count(*) FROM qualified) AS qualified,
                 (SELECT count(*) FROM qualified WHERE rel IS NOT NULL) AS matched) c
    -- The picked few's rows by primary key, one lookup each (a LATERAL kept apart by
    -- OFFSET 0): the pack pool's generic plan cannot tell LIMIT :lim is a handful.
    LEFT JOIN (picked p CROSS JOIN LATERAL (
        SELECT m.* FROM memories m WHERE m.org_id = :org AND m.id = p.id OFFSET 0) m) ON true
    ORDER BY p.rn, p.grp"""
    return head + middle + tail


class WakeRepository:
    """The read side of wake packs, bound to one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def select(self, scope: Scope, plan: WakePlan) -> WakeSelection:
        """The wake pack's memories in selection order (the first ``limit`` of the round
        robin), plus the scope's counts; with ``plan.goal``, each row's goal scores."""
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
            "lim": plan.limit,
        }
        goal = plan.goal
        if goal is None:
            params.update(boost_ids=plan.boost_ids, boost_rel=plan.boost_relevance)
        else:
            params.update(
                match_limit=plan.match_limit,
                generic_share=plan.generic_share,
                prior_types=goal.prior_types,
                prior_weights=goal.prior_weights,
            )
            if goal.mode in ("hybrid", "vector"):
                if goal.query_vector is None:
                    raise ValueError("vector retrieval needs a query vector")
                params.update(qvec=vector_literal(goal.query_vector), floor=goal.relevance_floor)
            if goal.mode in ("hybrid", "lexical"):
                params.update(
                    qtext=goal.query_text,
                    k1=goal.bm25_k1,
                    b=goal.bm25_b,
                    min_share=goal.min_lexical_share,
                )
            if goal.mode == "hybrid":
                params["vw"] = goal.vector_weight
        result = await self.session.execute(statement(build_wake_sql(scope, plan)), params)
        rows: list[WakeRow] = []
        in_scope = qualified = matched = 0
        for r in result.mappings().all():
            in_scope, qualified, matched = (
                int(r["in_scope"]),
                int(r["qualified"]),
                int(r["n_matched"]),
            )
            if r["id"] is None:
                continue
            rows.append(
                WakeRow(
                    **memory_fields(r),
                    group=int(r["grp"]),
                    depth=int(r["depth"]),
                    relevance=None if r["boost"] is None else float(r["boost"]),
                    cosine=None if r["cosine"] is None else float(r["cosine"]),
                    lexical=float(r["lexical"] or 0.0),
                    matched=list(r["matched"] or []),
                    goal_score=None if r["rel"] is None else float(r["rel"]),
                )
            )
        return WakeSelection(rows=rows, in_scope=in_scope, qualified=qualified, matched=matched)
