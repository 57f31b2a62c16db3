"""All SQL of context packs: scope, hybrid candidates, fusion, the relevance gate, the graph
step and each item's one-hop neighbours, in one statement.

The statement, for ``mode="hybrid"`` (``vector`` and ``lexical`` drop one retriever)::

    vec    nearest neighbours by cosine: ORDER BY embedding <=> :q LIMIT n (bare operator,
           ascending, so a wide scope can use the HNSW index; a narrow one is an exact scan
           behind the (org_id, namespace) btree)
    hits   in-scope memories matching the goal's terms (GIN on tsv AND the btree): on a
           narrow scope every match; on a wide one the matches of its rare terms and of
           pairs of common ones (selective_hits_ctes), planned for the probe's value
    tf     term frequencies of the goal's lexemes in those hits; df by window
    lex    BM25 (k1, b) per hit, divided by the goal's whole idf mass, so 1.0 means "holds
           every goal term" and a memory matching one common word scores low; top n
    scored the union of both candidate lists, with cosine = 1 - distance and the columns
           the gate and the score read: from the scope's rows on a narrow scope, from the
           branch that found each candidate (vec, hits) on a wide one, never by a key lookup
    gated  relevance = w * cosine + (1 - w) * lexical; the relevance gate (absolute floors,
           then, when set, a share of the best kept candidate's relevance)
    ranked relevance x intent type prior x domain boost x recency x the goal's dates (a boost
           when valid_at falls in a period the goal names); top ``limit``
    hop    (graph step) in-scope neighbours of ranked items, scored decay x parent's score
    final  ranked + hop, best ``limit``, each with its related list (LATERAL, in scope)

Scope is a WHERE clause built from the call's constraints only (no ``:x IS NULL OR``
branches, which would give the planner a generic plan that fits nobody): org, visible
namespaces, project, agent diary, superseded, expired, and for wake the allowed types. Every memory a
statement touches, neighbours included, passes the same predicates.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from psycopg import sql as pgsql
from psycopg.rows import dict_row
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.cache import TtlLru
from service.store.namespace_indexes import indexed_namespaces
from service.store.vectors import vector_literal

Mode = Literal["hybrid", "lexical", "vector"]


@dataclass(frozen=True)
class Scope:
    """Which memories a call may see."""

    org_id: uuid.UUID
    namespaces: list[str]
    project: str | None = None
    key_projects: list[str] = field(default_factory=list)
    agent_id: str | None = None
    include_superseded: bool = False
    types: list[str] | None = None


@dataclass(frozen=True)
class RankingPlan:
    """What to rank and how; every number comes from the domain (ranking.py)."""

    mode: Mode
    query_text: str
    query_vector: list[float] | None
    candidates: int
    # the vector side's candidates (``candidates`` is full text's, and a vector-only pack's)
    vector_candidates: int
    limit: int
    vector_weight: float
    relevance_floor: float
    lexical_floor: float
    min_lexical_share: float
    bm25_k1: float
    bm25_b: float
    prior_types: list[str]
    prior_weights: list[float]
    domain: str | None
    domain_boost: float
    recency_weight: float
    recency_days: float
    graph_decay: float | None
    related_limit: int
    hnsw_ef_search: int
    common_term_freq: float = 1.0
    common_term_min_rows: int = 0
    # A candidate's relevance must reach this share of the best gated one's (0: off).
    relative_gate: float = 0.0
    # Periods the goal names ([start, end) pairs): candidates whose valid_at falls in one
    # score x (1 + date_boost).
    date_starts: list[datetime] = field(default_factory=list)
    date_ends: list[datetime] = field(default_factory=list)
    date_boost: float = 0.0


MEMORY_ROW_FIELDS = (
    "id",
    "namespace",
    "type",
    "name",
    "content",
    "source",
    "origin",
    "url",
    "project",
    "domain",
    "agent_id",
    "created_at",
    "updated_at",
    "valid_at",
)


def memory_fields(r: Any) -> dict[str, Any]:
    """The stored columns of a pack statement's row (a mapping), as ``RankedRow`` and the
    wake rows carry them; ``metadata`` as a plain dict."""
    out = {k: r[k] for k in MEMORY_ROW_FIELDS}
    out["metadata"] = dict(r["metadata"] or {})
    return out


@dataclass
class RankedRow:
    """One pack item as SQL ranked it."""

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
    created_at: datetime
    updated_at: datetime
    valid_at: datetime | None
    metadata: dict[str, Any]
    cosine: float | None
    lexical: float
    matched: list[str]
    prior: float
    score: float
    via_id: uuid.UUID | None
    via_relationship: str | None
    related: list[dict[str, Any]]
    expires_at: datetime | None = None


@dataclass
class RankedPack:
    rows: list[RankedRow]
    gated_out: int
    candidates: int
    scope_rows: int


MEMORY_COLUMNS = (*MEMORY_ROW_FIELDS, "metadata", "expires_at")


def scope_sql(alias: str, scope: Scope, namespace: str | None = None, org: str = ":org") -> str:
    """The WHERE predicates of ``scope`` on the memories table aliased ``alias``; with
    ``namespace`` (an SQL expression: one of the scope's namespaces), of that namespace only.
    ``org``: the SQL expression of the org (its parameter, or its literal)."""
    a = alias
    ns = (
        f"{a}.namespace = {namespace}"
        if namespace
        else (f"{a}.namespace = ANY(CAST(:namespaces AS text[]))")
    )
    parts = [f"{a}.org_id = {org}", ns]
    if scope.project is not None:
        parts.append(f"({a}.project = :project OR {a}.project IS NULL)")
    elif scope.key_projects:
        parts.append(f"({a}.project IS NULL OR {a}.project = ANY(CAST(:key_projects AS text[])))")
    if scope.agent_id is not None:
        parts.append(f"({a}.agent_id IS NULL OR {a}.agent_id = :agent_id)")
    else:
        parts.append(f"{a}.agent_id IS NULL")
    if not scope.include_superseded:
        parts.append(f"{a}.superseded_by IS NULL")
    # Expired memories leave packs at once (the expiry job purges them later).
    parts.append(f"({a}.expires_at IS NULL OR {a}.expires_at > now())")
    if scope.types is not None:
        parts.append(f"{a}.type = ANY(CAST(:types AS text[]))")
    return " AND ".join(parts)


def per_namespace_sql(columns: str, where: str) -> str:
    """A FROM item ``m`` of ``columns`` of ``memories m`` rows matching ``where`` (which reads
    ``ns.n``, one of ``:namespaces``), read by one (org_id, namespace) btree lookup per
    namespace: a LATERAL kept apart by OFFSET 0.

    The pack pool plans a statement once, without its values (``database.create_engine``),
    and for ``namespace = ANY(:namespaces)`` such a plan guesses the rows from the table's
    statistics alone: in an org holding most rows in a few namespaces (a self-hosted team)
    the guess is "most of the org", and the plan read every row of the org to keep the
    scope's few (200-300 ms for a 1,000-row scope in a 111k-row org, 9 ms this way)."""
    return f"""(SELECT DISTINCT n FROM unnest(CAST(:namespaces AS text[])) AS u(n)) ns
            CROSS JOIN LATERAL (
                SELECT {columns}
                FROM memories m WHERE {where}
                OFFSET 0) m"""


def scope_rows_sql(scope: Scope, columns: str) -> str:
    """``per_namespace_sql`` of the scope's rows (every predicate of ``scope_sql``)."""
    return per_namespace_sql(columns, scope_sql("m", scope, namespace="ns.n"))


def sql_literal(value: str | uuid.UUID) -> str:
    """``value`` written as an SQL literal, quoted by psycopg, for a statement made by
    SQLAlchemy's ``text``, which reads ``:name`` as a bind parameter even inside quotes (a
    namespace segment may end in ``-`` or ``.`` before the next ``:``, as in ``a-:b``):
    each colon is escaped (``\\:``), and ``text`` writes it back as a colon."""
    return pgsql.Literal(value).as_string().replace(":", "\\:")


def distinct(scope: Scope) -> list[str]:
    """The scope's namespaces, each once, in order: a wide statement's branches."""
    return list(dict.fromkeys(scope.namespaces))


def scope_params(scope: Scope) -> dict[str, Any]:
    params: dict[str, Any] = {"org": scope.org_id, "namespaces": list(scope.namespaces)}
    if scope.project is not None:
        params["project"] = scope.project
    elif scope.key_projects:
        params["key_projects"] = list(scope.key_projects)
    if scope.agent_id is not None:
        params["agent_id"] = scope.agent_id
    if scope.types is not None:
        params["types"] = list(scope.types)
    return params


# A scope's memories are counted up to this (``scope_size``): a wide scope's BM25 N (idf
# uses greatest(N, df)), and the audit row's ``scope_rows``. Counting a 57k-row scope whole
# would read its 57k btree entries on every call.
SCOPE_COUNT_CAP = 10_001
# A wide scope's full-text hits read per call, at most (BM25 statistics come from these).
LEXICAL_HITS_CAP = 20000
# How long a scope's size is remembered (see scope_size).
SCOPE_SIZE_TTL = 10.0
_SCOPE_SIZES: TtlLru[tuple[Any, ...], int] = TtlLru(SCOPE_SIZE_TTL, 50_000)
# How long the table's common lexemes are remembered (ANALYZE refreshes them far less often).
COMMON_TERMS_TTL = 300.0
_COMMON_TERMS: TtlLru[tuple[Any, ...], dict[str, float]] = TtlLru(COMMON_TERMS_TTL, 16)
# How long "no common lexemes" is remembered: the table was below ``common_term_min_rows`` or
# not analyzed yet, which a growing table stops being within minutes (a bench measured its
# 100k-row scope at 140 ms p50, every match of every goal word read, on an answer kept from
# when the table held 11k rows; 44 ms once asked again).
NO_COMMON_TERMS_TTL = 10.0


def _edges(item: str) -> str:
    """Both directions of the relation edges of memory ``item``."""
    return f"""
        SELECT r.target_id AS id, r.relationship, 'outgoing' AS direction, r.created_at
        FROM relations r WHERE r.org_id = :org AND r.source_id = {item}
        UNION ALL
        SELECT r.source_id, r.relationship, 'incoming', r.created_at
        FROM relations r WHERE r.org_id = :org AND r.target_id = {item}"""


SCOPE_N_SQL = (
    f"(SELECT count(*) FROM {per_namespace_sql('1', 'm.org_id = :org AND m.namespace = ns.n')}"
    ")::float8"
)
"""N of BM25's idf counted in the statement: the memories of the scope's namespaces, one
btree range per namespace (``per_namespace_sql``)."""


# The goal's lexemes as a ranking statement's ``q.terms`` holds them (Postgres' english
# configuration decides them; nothing in Python reproduces its stemmer).
LEXEMES_SQL = "tsvector_to_array(to_tsvector('english', :qtext))"


# One tsquery per goal lexeme (``q.terms``), quoted as tsquery input wants (quotes and
# backslashes doubled; ``tsquery_term`` is its Python twin, for the probe); "\:A" is ":A"
# (weight A, the name) past SQLAlchemy.
TERMS_CTE = r"""terms AS MATERIALIZED (
            SELECT t.lexeme, t.quoted::tsquery AS tq, (t.quoted || '\:A')::tsquery AS tq_name
            FROM q CROSS JOIN LATERAL (
                SELECT lexeme,
                       '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''''
                FROM unnest(q.terms) AS lexeme) AS t(lexeme, quoted))"""


def bm25_ctes(scope_n: str, lex_tail: str = "", *, estimated: bool = False) -> list[str]:
    """BM25 over the goal's terms, as CTEs that follow a ``q`` (``terms``: the goal's
    lexemes) and a ``hits`` CTE (``id, tsv, len``, ``len`` the length of ``tsv``):
    ``terms``, ``tf``, ``idf`` and ``lex`` (``id, share, matched``). One definition for
    every statement that scores the goal's words: the ranked pack here and the wake
    statement (store/wake.py). A hit's length relative to the hits' mean is taken in ``tf``
    from one aggregate over ``hits`` (a window in ``hits`` kept a second copy of every hit).

    Args:
        scope_n: SQL for N, the number of memories in scope (idf's denominator).
        lex_tail: appended to ``lex`` after its GROUP BY (an ORDER BY / LIMIT cap).
        estimated: a wide scope's hits hold only the matches of its rare terms (see
            ``selective_hits_ctes``, which then has emitted ``terms`` and ``split``): a
            common term's df is estimated from its table-wide frequency, as hits cannot
            count it.

    The sums add their terms in lexeme order: floating-point addition is not associative,
    and a plan that meets the rows in another order (another node, another table size, a
    Citus shard) would otherwise give a share a few ulps apart, enough to swap two tied
    memories at a pack's cut-off. ``matched`` is in lexeme order too, so that both of a
    hit's aggregates read its rows in one sorted pass (ordered by idf, each aggregate sorted
    every hit's rows apart: 1,460 hits took 10 ms): ``matched_by_idf`` orders the few that
    are shown. df is counted by a GROUP BY over ``tf`` (a window over it sorted every row).
    """
    if estimated:
        # df: counted in the hits for a rare term (hits hold all its matches), the
        # table-wide frequency times N for a common one.
        df = f"CASE WHEN s.common THEN s.freq * {scope_n} ELSE coalesce(d.df, 0) END"
        lexemes = "split s"
    else:
        df = "coalesce(d.df, 0)"
        lexemes = "q CROSS JOIN LATERAL unnest(q.terms) AS s(lexeme)"
    ctes = [] if estimated else [TERMS_CTE]
    idf = f"""idf AS MATERIALIZED (
            SELECT x.lexeme, ln(1 + (greatest({scope_n}, x.df) - x.df + 0.5) / (x.df + 0.5)) AS idf
            FROM (SELECT s.lexeme, {df} AS df
                  FROM {lexemes}
                  LEFT JOIN (SELECT lexeme, count(*)::float8 AS df FROM tf GROUP BY lexeme) d
                  USING (lexeme)) x)"""
    return [
        *ctes,
        # Term frequency from two matches per hit and term rather than by unnesting each
        # hit's positions (several times slower): 1, plus 1 when the name has the term too.
        """tf AS MATERIALIZED (
            SELECT h.id, h.len / (SELECT avg(a.len) FROM hits a) AS rel_len, t.lexeme,
                   1 + (h.tsv @@ t.tq_name)::int::float8 AS tf
            FROM hits h JOIN terms t ON h.tsv @@ t.tq)""",
        # idf of every goal term, matched or not: their sum is the lexical share's denominator.
        idf,
        f"""lex AS (
            SELECT tf.id,
                   sum(i.idf * tf.tf * (:k1 + 1) / (tf.tf + :k1 * (1 - :b + :b * tf.rel_len))
                       ORDER BY tf.lexeme)
                     / nullif((SELECT sum(idf ORDER BY lexeme) FROM idf) * (:k1 + 1), 0) AS share,
                   array_agg(tf.lexeme ORDER BY tf.lexeme) AS matched
            FROM tf JOIN idf i USING (lexeme)
            GROUP BY tf.id
            {lex_tail})""",
    ]


def matched_by_idf(matched: str) -> str:
    """``matched`` (an SQL expression: the lexemes ``lex`` gives a hit, in lexeme order)
    ordered as a reason shows them: the rarest first (highest idf), ties by lexeme. Reads the
    ``idf`` CTE of ``bm25_ctes``; applied to the few rows a statement returns."""
    return (
        f"ARRAY(SELECT i.lexeme FROM idf i WHERE i.lexeme = ANY({matched})"
        " ORDER BY i.idf DESC, i.lexeme)"
    )


def selective_hits_ctes(branches: Sequence[str], carry: str = "") -> list[str]:
    """A wide scope's full-text hits, read through its goal's rare clauses only.

    Reading every in-scope memory that matches any goal word costs time in proportion to
    the scope: a name or a common verb matches thousands of a 100k scope's memories, each
    one a heap read and a BM25 sum, and such a word adds little to a share (its idf is
    low). So the hits are the matches of the clauses ``probe_query`` keeps (the goal's rare
    lexemes, and pairs of common ones that are rare together); a common lexeme
    (``:common_lexemes``, from the table's statistics, see ``common_terms``) still scores
    on every hit, and its df is estimated from its table-wide frequency (``bm25_ctes``,
    ``estimated``). Without statistics (a fresh table, a Citus coordinator) every lexeme is rare:
    every match is read, as on a narrow scope. ``:probe`` is ``probe_query``'s tsquery.
    ``branches``: the scope's predicates, one per namespace (read each through its own
    GIN index when it has one). ``carry``: more of each hit's columns (``, m.type, ...``),
    taken while its row is read."""
    matches = " UNION ALL ".join(
        f"(SELECT m.id, m.tsv{carry} FROM memories m"
        f" WHERE {where} AND m.tsv @@ CAST(:probe AS tsquery))"
        for where in branches
    )
    return [
        TERMS_CTE,
        """split AS MATERIALIZED (
            SELECT t.lexeme, c.freq, c.freq IS NOT NULL AS common
            FROM terms t
            LEFT JOIN unnest(CAST(:common_lexemes AS text[]), CAST(:common_freqs AS float8[]))
                 AS c(lexeme, freq) USING (lexeme))""",
        # The probe is a constant of the statement (``probe_query``), not computed in it:
        # planned with its value, a rare term's short posting list is read alone and each
        # match checked against the scope, while a long one is ANDed with the btree.
        f"""hits AS MATERIALIZED (
            SELECT u.*, length(u.tsv)::float8 AS len
            FROM ({matches}) u LIMIT :lex_cap)""",
    ]


PAIRED_COMMON_TERMS = 8


def tsquery_term(lexeme: str) -> str:
    """``lexeme`` as one quoted term of tsquery input (quotes and backslashes doubled)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def probe_query(lexemes: list[str], common: dict[str, float], max_freq: float) -> str:
    """The tsquery of a wide scope's hits (``selective_hits_ctes``): every clause whose
    expected share of the table's memories is below ``max_freq``, ORed. A rare lexeme is
    such a clause; two common lexemes together are one when the product of their
    frequencies is (independence: a name and a common verb are read together, two verbs
    are not), among the ``PAIRED_COMMON_TERMS`` rarest of them. A goal with no such clause
    reads the memories holding its three rarest lexemes. Empty when the goal has no lexeme
    (it then matches nothing)."""
    distinct = set(lexemes)
    rare = sorted(lexeme for lexeme in distinct if lexeme not in common)
    frequent = sorted(distinct - set(rare), key=lambda x: (common[x], x))[:PAIRED_COMMON_TERMS]
    parts = [tsquery_term(lexeme) for lexeme in rare]
    parts += [
        f"({tsquery_term(a)} & {tsquery_term(b)})"
        for i, a in enumerate(frequent)
        for b in frequent[i + 1 :]
        if common[a] * common[b] < max_freq
    ]
    if not parts:
        return " & ".join(tsquery_term(lexeme) for lexeme in frequent[:3])
    return " | ".join(parts)


def probe_params(
    lexemes: Sequence[str], common: dict[str, float], max_freq: float
) -> dict[str, Any]:
    """A wide scope's full-text parameters (``selective_hits_ctes``): ``:probe``
    (``probe_query``) and the goal's common lexemes with their table-wide frequencies
    (``:common_lexemes``, ``:common_freqs``): only the goal's, which are all ``split``
    reads, not the table's hundreds (binding those took 0.9 ms of a call)."""
    goal_common = sorted(lexeme for lexeme in set(lexemes) if lexeme in common)
    return {
        "probe": probe_query(list(lexemes), common, max_freq),
        "common_lexemes": goal_common,
        "common_freqs": [common[lexeme] for lexeme in goal_common],
    }


def build_pack_sql(
    scope: Scope, plan: RankingPlan, *, narrow: bool, literal_scope: bool = False
) -> str:
    """The ranking statement for this scope and plan (see the module docstring).

    ``narrow``: the scope holds few enough rows for an exact scan. The statement always
    returns at least one row: the counts, with NULL item columns when the pack is empty.
    ``literal_scope`` (a wide scope only): each branch names its org and namespace as
    literals rather than parameters, so that a plan made without the call's values (a
    generic plan, kept with the prepared statement) still proves the namespace's partial
    indexes; see ``RetrievalRepository.rank``."""
    use_vec = plan.mode in ("hybrid", "vector")
    use_lex = plan.mode in ("hybrid", "lexical")
    in_scope = scope_sql("m", scope)
    cols = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
    qvec = "CAST(:qvec AS vector)"
    ctes: list[str] = []
    # The goal's dates (a boost only): candidates carry valid_at when the goal names a period.
    dated = ", m.valid_at" if plan.date_starts else ""
    if use_lex:
        ctes.append(
            f"""q AS (
            SELECT {LEXEMES_SQL} AS terms,
                   replace(plainto_tsquery('english', :qtext)::text, '&', '|')::tsquery AS tsq)"""
        )
    if narrow:
        # A narrow scope: read its rows once through the (org_id, namespace) btree
        # (``scope_rows_sql``), computing each distance; the CTE is a fence, so neither HNSW
        # nor the GIN index (both over every org's rows) is consulted. Exact, and cheaper
        # than either index below a few thousand rows.
        read = f"m.id, m.type, m.domain, m.created_at{dated}{', m.tsv' if use_lex else ''}"
        if use_vec:
            read += f", m.embedding <=> {qvec} AS dist"
        ctes.append(f"scoped AS MATERIALIZED (SELECT m.* FROM {scope_rows_sql(scope, read)})")
        if use_vec:
            ctes.append("vec AS (SELECT id FROM scoped ORDER BY dist, id LIMIT :n_vec)")
        if use_lex:
            ctes.append(
                """hits AS MATERIALIZED (
                SELECT s.id, s.tsv, length(s.tsv)::float8 AS len
                FROM scoped s, q WHERE s.tsv @@ q.tsq)"""
            )
    else:
        # A wide scope: one branch per namespace, its org and namespace bound as values
        # (``:ns_0``...; the caller plans it for them) or written as literals
        # (``literal_scope``), so that an indexed namespace's partial HNSW and GIN indexes
        # prove their predicates (store/namespace_indexes.py) and an unindexed one is read
        # behind the btree. HNSW takes the bare operator, ascending, with iterative scan
        # set by the caller.
        names = distinct(scope)
        if literal_scope:
            org, named = sql_literal(scope.org_id), [sql_literal(ns) for ns in names]
        else:
            org, named = ":org", [f":ns_{i}" for i in range(len(names))]
        branches = [scope_sql("m", scope, namespace=ns, org=org) for ns in named]
        # Each candidate carries what the gate and the score read, taken while its branch
        # reads its row (the distance too), so none is read again by its key (``scored``).
        light = f"m.type, m.domain, m.created_at{dated}"
        if use_vec:
            nearest = " UNION ALL ".join(
                f"""(SELECT m.id, m.embedding <=> {qvec} AS dist, {light} FROM memories m
                    WHERE {where} ORDER BY m.embedding <=> {qvec} LIMIT :n_vec)"""
                for where in branches
            )
            ctes.append(
                f"""vec AS (
                SELECT * FROM ({nearest}) v ORDER BY dist, id LIMIT :n_vec)"""
            )
        if use_lex:
            hit_cosine = f", 1 - (m.embedding <=> {qvec}) AS cosine" if use_vec else ""
            ctes += selective_hits_ctes(branches, f", {light}{hit_cosine}")
    if use_lex:
        # N: the memories of the scope's namespaces: counted here for a narrow scope (an
        # index-only scan), the probe's capped count for a wide one.
        scope_n = SCOPE_N_SQL if narrow else "CAST(:scope_n AS float8)"
        ctes += bm25_ctes(
            scope_n,
            lex_tail="ORDER BY share DESC, tf.id\n            LIMIT :n_cand",
            estimated=not narrow,
        )
    # The candidates, each once, carrying its lexical share (0 for vector-only ones).
    if use_vec and use_lex:
        ctes.append(
            """cand AS (
            SELECT id, max(share) AS share, max(matched) AS matched
            FROM (SELECT id, 0::float8 AS share, '{}'::text[] AS matched FROM vec
                  UNION ALL SELECT id, share, matched FROM lex) u
            GROUP BY id)"""
        )
    elif use_vec:
        ctes.append("cand AS (SELECT id, 0::float8 AS share, '{}'::text[] AS matched FROM vec)")
    else:
        ctes.append("cand AS (SELECT id, share, matched FROM lex)")

    cosine = f"1 - (m.embedding <=> {qvec})" if use_vec else "NULL::float8"
    # Candidates carry only what the gate and the score read; whole rows are fetched for
    # the ranked few. A narrow scope's rows already hold all of it, distance included.
    if narrow:
        light = f"m.id, m.type, m.domain, m.created_at{dated}, " + (
            "1 - m.dist" if use_vec else "NULL::float8"
        )
        source = "JOIN scoped m ON m.id = cand.id"
    else:
        # A wide scope's candidates as their branches read them: a vector candidate's
        # columns and distance from ``vec``, a full-text one's from ``hits`` (alias -> the
        # CTE and its cosine; ``hits`` has none in lexical mode).
        found: dict[str, tuple[str, str | None]] = {}
        if use_vec:
            found["v"] = ("vec", "1 - v.dist")
        if use_lex:
            found["h"] = ("hits", "h.cosine" if use_vec else None)

        def first(exprs: list[str]) -> str:
            return exprs[0] if len(exprs) == 1 else f"coalesce({', '.join(exprs)})"

        columns = ["type", "domain", "created_at"] + (["valid_at"] if dated else [])
        cosines = [c for _, c in found.values() if c is not None]
        light = ", ".join(
            ["cand.id"]
            + [f"{first([f'{a}.{c}' for a in found])} AS {c}" for c in columns]
            + [first(cosines) if cosines else "NULL::float8"]
        )
        source = " ".join(
            f"LEFT JOIN {cte} {a} ON {a}.id = cand.id" for a, (cte, _) in found.items()
        )
    ctes.append(
        f"""scored AS (
        SELECT {light} AS cosine, coalesce(cand.share, 0) AS lexical, cand.matched
        FROM cand {source})"""
    )
    if plan.mode == "hybrid":
        relevance = ":vw * s.cosine + (1 - :vw) * s.lexical"
        gate = "s.cosine >= :floor OR (s.lexical >= :min_share AND s.cosine >= :lex_floor)"
    elif plan.mode == "vector":
        relevance = "s.cosine"
        gate = "s.cosine >= :floor"
    else:
        relevance = "s.lexical"
        gate = "s.lexical >= :min_share"
    prior = (
        "coalesce((CAST(:prior_weights AS float8[]))"
        "[array_position(CAST(:prior_types AS text[]), s.type::text)], 1.0)"
    )
    if plan.domain is not None:
        prior += " * CASE WHEN s.domain = :domain THEN :domain_boost ELSE 1.0 END"
    relevant = f"({gate})"
    if plan.relative_gate > 0:
        # The relative gate: a candidate must also reach a share of the best relevance
        # among those the absolute gate keeps (a window over the candidates only).
        relevant += (
            f" AND {relevance} >= :rel_gate * max(CASE WHEN {gate} THEN {relevance} END) OVER ()"
        )
    ctes.append(
        f"""gated AS (
        SELECT s.*, {relevant} AS relevant, {relevance} AS relevance, {prior} AS prior
        FROM scored s)"""
    )
    recency = (
        "(1 + :recency_weight * exp(-extract(epoch FROM (now() - g.created_at))"
        " / 86400.0 / :recency_days))"
        if plan.recency_weight > 0
        else "1.0"
    )
    dates = "1.0"
    if plan.date_starts:
        dates = (
            "(CASE WHEN EXISTS (SELECT 1 FROM unnest(CAST(:d_from AS timestamptz[]),"
            " CAST(:d_to AS timestamptz[])) AS p(a, b)"
            " WHERE g.valid_at >= p.a AND g.valid_at < p.b) THEN 1 + :date_boost ELSE 1.0 END)"
        )
    ctes.append(
        f"""ranked AS (
        SELECT {cols}, t.cosine, t.lexical, {matched_by_idf("t.matched") if use_lex else "t.matched"} AS matched,
               t.prior, t.score,
               NULL::uuid AS via_id, NULL::text AS via_relationship
        FROM (SELECT g.id, g.cosine, g.lexical, g.matched, g.prior,
                     g.relevance * g.prior * {recency} * {dates} AS score
              FROM gated g WHERE g.relevant
              ORDER BY score DESC, g.id
              LIMIT :lim) t
        JOIN memories m ON m.org_id = :org AND m.id = t.id)"""
    )
    pool = "ranked"
    if plan.graph_decay is not None:
        ctes.append(
            f"""hop AS (
            SELECT DISTINCT ON (m.id) {cols}, {cosine} AS cosine, 0::float8 AS lexical,
                   '{{}}'::text[] AS matched, 1.0::float8 AS prior,
                   t.score * :decay AS score, t.id AS via_id, e.relationship AS via_relationship
            FROM ranked t
            CROSS JOIN LATERAL ({_edges("t.id")}) e
            JOIN memories m ON m.org_id = :org AND m.id = e.id
            WHERE {in_scope} AND m.id NOT IN (SELECT id FROM ranked)
            ORDER BY m.id, t.score DESC, e.relationship)"""
        )
        ctes.append(
            """pool AS (
            SELECT * FROM (SELECT * FROM ranked UNION ALL SELECT * FROM hop) u
            ORDER BY score DESC, id LIMIT :lim)"""
        )
        pool = "pool"
    related = "'[]'::jsonb"
    related_join = ""
    if plan.related_limit > 0:
        related = "coalesce(rel.related, '[]'::jsonb)"
        related_join = f"""
            LEFT JOIN LATERAL (
                SELECT jsonb_agg(jsonb_build_object(
                           'id', x.id, 'type', x.type, 'name', x.name,
                           'relationship', x.relationship, 'direction', x.direction)
                       ORDER BY x.created_at DESC, x.id) AS related
                FROM (
                    SELECT m.id, m.type, m.name, e.relationship, e.direction, e.created_at
                    FROM ({_edges("f.id")}) e
                    JOIN memories m ON m.org_id = :org AND m.id = e.id
                    WHERE {in_scope}
                    ORDER BY e.created_at DESC, m.id
                    LIMIT :related_limit
                ) x
            ) rel ON true"""
    return (
        "WITH "
        + ",\n".join(ctes)
        + f"""
    SELECT c.gated_out, c.candidates, p.*
    FROM (SELECT (SELECT count(*) FROM gated g
                  WHERE NOT g.relevant AND g.id NOT IN (SELECT id FROM {pool})) AS gated_out,
                 (SELECT count(*) FROM cand) AS candidates) c
    LEFT JOIN (
        SELECT f.*, {related} AS related
        FROM {pool} f {related_join}
    ) p ON true
    ORDER BY p.score DESC, p.id"""
    )


@lru_cache(maxsize=512)
def statement(sql: str) -> TextClause:
    """``text(sql)``, made once per text. A pack statement's text depends on the scope's
    shape and the plan's switches, and for a fully indexed wide scope on its org and
    namespaces (``literal_scope``), so texts recur call after call; parsing one's bind
    parameters (7 kB, ~60 of them) took 0.6 ms of every call on the event loop. The 512
    most recent are kept."""
    return text(sql)


def _engine_option(session: AsyncSession, option: str) -> bool:
    bind = session.bind
    options = bind.get_execution_options() if isinstance(bind, AsyncEngine) else {}
    return bool(options.get(option))


def _autocommit(session: AsyncSession) -> bool:
    return _engine_option(session, "ctxpack_autocommit")


WIDE_RANDOM_PAGE_COST = 1.1
"""``random_page_cost`` of a wide scope's ranking (``use_indexes``)."""


async def use_indexes(
    session: AsyncSession,
    ef_search: int,
    goal: str | None = None,
    *,
    custom_plans: bool = True,
    rows: int = 0,
    max_scan: int | None = None,
) -> list[str]:
    """For this transaction only: search HNSW at ``ef_search`` and, on pgvector >= 0.8,
    keep scanning past it while a branch asks for more rows (up to ``rows``) and past rows
    the scope filter drops, instead of returning fewer neighbours than exist (0.7 has no
    iterative scan and would reject the setting: there the search is ``rows`` wide at least,
    ``index_settings``).
    With ``custom_plans``, plans go back to custom: whether HNSW or the btree wins depends
    on the values. Without, the session's plan cache mode stands (a scope whose every
    namespace has its own indexes, written as literals: ``RetrievalRepository.rank``).

    On Citus the settings must reach the worker that runs the statement: there they are
    ``SET LOCAL`` statements, which the coordinator propagates (``set_config`` is not),
    and plans are custom already; Citus needs pgvector >= 0.8 on every node.

    The pack pool's ban on sequential scans (``database.create_engine``, for its generic
    plans) is lifted: these plans are made for the call's values.

    ``random_page_cost`` drops to ``WIDE_RANDOM_PAGE_COST`` for the transaction: at the
    default 4.0 the planner ANDs the GIN hits with a bitmap of the whole namespace (tens of
    thousands of entries, 3-20 ms at a 57k-row scope) rather than reading the few hits and
    filtering them; the indexes of a wide scope are hot, so a random read is not 4 sequential
    ones (EXPLAIN ANALYZE in docs/context.md, 'Big scopes').

    ``max_scan`` (a near-duplicate probe's, ``memories.NEAR_DUPLICATE_MAX_SCAN``): the
    statements walk the graph, never sort the namespace instead (``enable_sort`` off), and
    an iterative scan stops after about this many tuples (``hnsw.max_scan_tuples``).

    With ``goal``, returns its lexemes (``lexemes``), on one node in the same round trip."""
    if _engine_option(session, "ctxpack_citus"):
        # One round trip: the statements in one simple query (no parameters to bind).
        walk = (
            f"; SET LOCAL enable_sort = off; SET LOCAL hnsw.max_scan_tuples = {int(max_scan)}"
            if max_scan is not None
            else ""
        )
        await session.execute(
            text(
                f"SET LOCAL hnsw.ef_search = {int(ef_search)}; "
                "SET LOCAL hnsw.iterative_scan = relaxed_order; "
                f"SET LOCAL random_page_cost = {float(WIDE_RANDOM_PAGE_COST)}" + walk
            )
        )
        return [] if goal is None else await lexemes(session, goal)
    sql, params = index_settings(
        ef_search, goal, custom_plans=custom_plans, rows=rows, max_scan=max_scan
    )
    row = (await session.execute(statement(sql), params)).one()
    return list(row[-1] or [])


def index_settings(
    ef_search: int,
    goal: str | None,
    *,
    custom_plans: bool,
    rows: int = 0,
    max_scan: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """``use_indexes``'s statement on one node, and its parameters: the settings for the
    transaction, and the goal's lexemes as its last column (NULL without a goal).

    ``rows``: the most rows an HNSW branch returns. pgvector >= 0.8 searches at
    ``ef_search`` and its iterative scan goes on past it while the branch asks for more; an
    older one returns at most ``ef_search`` rows, so there the search is at least ``rows``
    wide. ``max_scan``: see ``use_indexes`` (pgvector >= 0.8; an older one has no iterative
    scan to stop)."""
    terms = LEXEMES_SQL if goal is not None else "NULL::text[]"
    custom = "set_config('plan_cache_mode', 'force_custom_plan', true)," if custom_plans else ""
    iterative = "string_to_array(extversion, '.')::int[] >= '{0,8}'"
    walk = (
        f"""set_config('enable_sort', 'off', true),
               CASE WHEN {iterative}
                    THEN set_config('hnsw.max_scan_tuples', :max_scan, true) END,"""
        if max_scan is not None
        else ""
    )
    sql = f"""
        SELECT set_config('hnsw.ef_search', CASE WHEN {iterative} THEN :ef ELSE :ef_rows END, true),
               {custom}
               set_config('enable_seqscan', 'on', true),
               set_config('random_page_cost', :rpc, true),
               CASE WHEN {iterative}
                    THEN set_config('hnsw.iterative_scan', 'relaxed_order', true) END,
               {walk}
               {terms}
        FROM pg_extension WHERE extname = 'vector'
        """
    params: dict[str, Any] = {
        "ef": str(ef_search),
        "ef_rows": str(max(ef_search, rows)),
        "rpc": str(WIDE_RANDOM_PAGE_COST),
    }
    if max_scan is not None:
        params["max_scan"] = str(max_scan)
    if goal is not None:
        params["qtext"] = goal
    return sql, params


@lru_cache(maxsize=512)
def driver_sql(sql: str, dialect: Any) -> str:
    """``sql`` (``:name`` parameters, as ``statement`` takes it) in the driver's own
    placeholders (``%(name)s``), compiled by SQLAlchemy once per text and dialect."""
    return str(statement(sql).compile(dialect=dialect))


async def pipelined_transaction(
    session: AsyncSession,
    settings: tuple[str, dict[str, Any]],
    ranked: Any,
) -> Sequence[Any]:
    """A wide pack on an autocommit connection in two round trips rather than four:
    ``BEGIN`` with ``settings`` (``index_settings``) in one psycopg pipeline, then the
    statement ``ranked(lexemes)`` gives (its text and parameters, built from the goal's
    lexemes the first trip returned) with ``COMMIT`` in a second. On any failure the
    transaction is rolled back."""
    connection = await session.connection()
    raw: Any = (await connection.get_raw_connection()).driver_connection
    dialect = connection.dialect
    try:
        async with raw.pipeline():
            await raw.execute("BEGIN")
            first = await raw.execute(driver_sql(settings[0], dialect), settings[1])
        row = await first.fetchone()
        if row is None:  # as ``use_indexes``'s ``.one()``: no vector extension, no pack
            raise RuntimeError("the vector extension is not installed")
        sql, params = ranked(list(row[-1] or []))
        async with raw.pipeline():
            cursor = raw.cursor(row_factory=dict_row)
            await cursor.execute(driver_sql(sql, dialect), params)
            await raw.execute("COMMIT")
        rows: list[dict[str, Any]] = await cursor.fetchall()
        return rows
    except BaseException:
        with contextlib.suppress(Exception):
            await raw.execute("ROLLBACK")
        raise


async def lexemes(session: AsyncSession, goal: str) -> list[str]:
    """``goal``'s lexemes (``LEXEMES_SQL``)."""
    result = await session.execute(text(f"SELECT {LEXEMES_SQL}"), {"qtext": goal})
    return list(result.scalar_one() or [])


# Each shard's row count and ``tsv`` statistics, read on its worker (as Citus's own
# ``citus_stats`` view does): one JSON text per shard; "%s" is the shard's name.
SHARD_STATS_SQL = """
    SELECT r.result
    FROM run_command_on_shards('memories', $cmd$
        SELECT json_build_object(
            'rows', greatest(c.reltuples, 0),
            'elems', CAST(CAST(s.most_common_elems AS text) AS text[]),
            'freqs', s.most_common_elem_freqs)
        FROM pg_class c
        LEFT JOIN pg_stats s
          ON s.tablename = c.relname AND s.attname = 'tsv'
         AND s.schemaname = (SELECT nspname FROM pg_namespace WHERE oid = c.relnamespace)
        WHERE c.oid = '%s'::regclass
    $cmd$) r
    WHERE r.success"""


def shard_common_terms(shards: Sequence[str], min_freq: float, min_rows: float) -> dict[str, float]:
    """``common_terms`` of a distributed table from its shards' statistics
    (``SHARD_STATS_SQL``): a lexeme's frequency is its shards' frequencies weighted by their
    row counts. A shard that does not list a lexeme among its most common elements counts it
    as absent (it is rarer there than that shard's cut-off), so a frequency is never
    overstated."""
    total = 0.0
    counts: dict[str, float] = {}
    for raw in shards:
        stats = json.loads(raw)
        rows = max(float(stats.get("rows") or 0.0), 0.0)
        total += rows
        # most_common_elem_freqs ends with three summary numbers: zip stops at the elements.
        elems = stats.get("elems") or []
        freqs = stats.get("freqs") or []
        for lexeme, freq in zip(elems, freqs, strict=False):
            if lexeme is not None and freq is not None:
                counts[lexeme] = counts.get(lexeme, 0.0) + float(freq) * rows
    if total <= 0 or total < min_rows:
        return {}
    return {lexeme: count / total for lexeme, count in counts.items() if count / total >= min_freq}


class RetrievalRepository:
    """The read side of context packs, bound to one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def scope_size(self, scope: Scope, cap: int) -> int:
        """``_probe``'s count, remembered for ``SCOPE_SIZE_TTL`` seconds per org and
        namespaces: it only chooses the plan (a narrow scope's BM25 N is counted in the
        ranking statement itself), so a few seconds' staleness changes no result."""
        key = (scope.org_id, tuple(scope.namespaces), cap)
        size = _SCOPE_SIZES.get(key)
        if size is None:
            size = await self._probe(scope, cap)
            _SCOPE_SIZES.put(key, size)
        return size

    async def _probe(self, scope: Scope, cap: int) -> int:
        """Memories in the scope's namespaces, counted up to ``cap`` (an index-only scan of
        the btree): a wide scope's BM25 N (capped; idf uses greatest(N, df)).

        Context packs run on connections that default to generic plans (see
        ``database.create_engine``): the ranking statement of a narrow scope has one right
        plan whatever its parameters (the btree, then work on the fenced rows), and Postgres
        otherwise re-plans it on every call, which took longer than running it (1.2 of
        2.2 ms). A wide scope goes back to custom plans (``use_indexes``)."""
        sql = text(
            """
            SELECT count(*)
            FROM (
                SELECT 1 FROM memories m
                WHERE m.org_id = :org AND m.namespace = ANY(CAST(:namespaces AS text[]))
                LIMIT :cap) s
            """
        )
        params = {"org": scope.org_id, "namespaces": list(scope.namespaces), "cap": cap}
        return int((await self.session.execute(sql, params)).one()[0])

    async def common_terms(self, min_freq: float, min_rows: int) -> dict[str, float]:
        """The lexemes in at least ``min_freq`` of all memories, with that frequency, from
        the table's statistics (``pg_stats.most_common_elems`` of ``tsv``, which ANALYZE
        keeps); none while the table holds fewer than ``min_rows`` rows, whose posting lists
        are short enough to read whole. Remembered for ``COMMON_TERMS_TTL`` seconds: the
        frequencies only steer which matches a wide scope reads (``selective_hits_ctes``).

        On a Citus coordinator the distributed table has no statistics of its own: its
        shards' are read on the workers (``shard_common_terms``) and weighted by each
        shard's row count."""
        bind = self.session.bind
        url = bind.url if isinstance(bind, AsyncEngine) else None
        key = (str(url), min_freq, min_rows)
        terms = _COMMON_TERMS.get(key)
        if terms is None:
            if _engine_option(self.session, "ctxpack_citus"):
                shards = (await self.session.execute(text(SHARD_STATS_SQL))).scalars().all()
                terms = shard_common_terms(shards, min_freq, min_rows)
            else:
                sql = text(
                    """
                    SELECT e.lexeme, e.freq
                    FROM pg_stats s
                    CROSS JOIN LATERAL unnest(
                        CAST(CAST(s.most_common_elems AS text) AS text[]),
                        s.most_common_elem_freqs) AS e(lexeme, freq)
                    WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
                      AND s.attname = 'tsv' AND e.lexeme IS NOT NULL AND e.freq >= :min_freq
                      AND (SELECT c.reltuples FROM pg_class c
                           WHERE c.oid = CAST('memories' AS regclass)) >= :min_rows
                    """
                )
                params = {"min_freq": min_freq, "min_rows": min_rows}
                rows = (await self.session.execute(sql, params)).all()
                terms = {str(lexeme): float(freq) for lexeme, freq in rows}
            _COMMON_TERMS.put(key, terms, ttl=None if terms else NO_COMMON_TERMS_TTL)
        return terms

    async def use_indexes(
        self, ef_search: int, goal: str | None = None, *, custom_plans: bool = True, rows: int = 0
    ) -> list[str]:
        """``use_indexes`` (the module's) for this session's transaction."""
        return await use_indexes(
            self.session, ef_search, goal, custom_plans=custom_plans, rows=rows
        )

    async def rank(
        self,
        scope: Scope,
        plan: RankingPlan,
        scope_rows: int,
        common_terms: dict[str, float] | None = None,
        indexed: frozenset[str] | None = None,
    ) -> RankedPack:
        """Rank the scope's memories for ``plan``; returns at most ``plan.limit`` rows, best
        first, plus how many candidates the relevance gate left out.

        The plan: the indexes when a namespace of the scope has its own
        (store/namespace_indexes.py: one holding more than ``exact_scan_max_rows``
        memories, once its indexes are built), an exact scan of the scope otherwise.
        ``scope_rows`` (from ``scope_size``, capped) is a wide scope's BM25 N.
        ``common_terms`` (lexeme -> table-wide frequency) steers a wide scope's full-text
        hits; by default the table's statistics (``common_terms``). ``indexed``: the scope's
        namespaces that have their own indexes; by default read from the catalog
        (``namespace_indexes.indexed_namespaces``).

        A wide scope whose every namespace has its own indexes is ranked by a plan made
        once per statement text and kept with the prepared statement (the session's plan
        cache mode; the pack pool's is generic), its org and namespaces written into the
        text (``literal_scope``) so the plan still proves their partial indexes: planning
        the wide statement took 4-5 ms of every call at a 57k-row scope. Any other wide
        scope, and every scope on Citus (whose router needs each statement planned for its
        values), is planned for the call's values, as before."""
        if indexed is None:
            indexed = await indexed_namespaces(self.session, scope.org_id, scope.namespaces)
        narrow = not indexed
        literal_scope = (
            not narrow
            and not _engine_option(self.session, "ctxpack_citus")
            and set(distinct(scope)) <= indexed
        )
        params: dict[str, Any] = {
            **scope_params(scope),
            "n_cand": plan.candidates,
            "lim": plan.limit,
            "prior_types": plan.prior_types,
            "prior_weights": plan.prior_weights,
        }
        if plan.domain is not None:
            params.update(domain=plan.domain, domain_boost=plan.domain_boost)
        if plan.mode in ("hybrid", "vector"):
            if plan.query_vector is None:
                raise ValueError("vector retrieval needs a query vector")
            params["qvec"] = vector_literal(plan.query_vector)
            params["n_vec"] = plan.vector_candidates
            params["floor"] = plan.relevance_floor
        if plan.mode in ("hybrid", "lexical"):
            params.update(
                qtext=plan.query_text,
                k1=plan.bm25_k1,
                b=plan.bm25_b,
                min_share=plan.min_lexical_share,
            )
            if not narrow:
                params["scope_n"] = scope_rows
                params["lex_cap"] = LEXICAL_HITS_CAP
        if not narrow and not literal_scope:
            params.update({f"ns_{i}": ns for i, ns in enumerate(distinct(scope))})
        if plan.mode == "hybrid":
            params.update(vw=plan.vector_weight, lex_floor=plan.lexical_floor)
        if plan.recency_weight > 0:
            params.update(recency_weight=plan.recency_weight, recency_days=plan.recency_days)
        if plan.relative_gate > 0:
            params["rel_gate"] = plan.relative_gate
        if plan.date_starts:
            params.update(
                d_from=list(plan.date_starts), d_to=list(plan.date_ends), date_boost=plan.date_boost
            )
        if plan.graph_decay is not None:
            params["decay"] = plan.graph_decay
        if plan.related_limit > 0:
            params["related_limit"] = plan.related_limit
        sql = build_pack_sql(scope, plan, narrow=narrow, literal_scope=literal_scope)
        if narrow:
            result = await self.session.execute(statement(sql), params)
        else:
            lexical = plan.mode in ("hybrid", "lexical")
            if lexical and common_terms is None:
                common_terms = await self.common_terms(
                    plan.common_term_freq, plan.common_term_min_rows
                )
            # The index settings are transaction-local: on an autocommit session (the pack
            # pool) the statements get a transaction of their own, sent with them in two
            # pipelines on one node (two round trips fewer: about 0.8 ms of a call).
            goal = plan.query_text if lexical else None

            def ranked(lexemes: list[str]) -> tuple[str, dict[str, Any]]:
                """The statement and its parameters, the probe made from the goal's lexemes
                (which the settings' round trip returns)."""
                if lexical:
                    assert common_terms is not None
                    params.update(probe_params(lexemes, common_terms, plan.common_term_freq))
                return sql, params

            explicit = _autocommit(self.session)
            if explicit and not _engine_option(self.session, "ctxpack_citus"):
                settings = index_settings(
                    plan.hnsw_ef_search,
                    goal,
                    custom_plans=not literal_scope,
                    rows=plan.vector_candidates,
                )
                fetched = await pipelined_transaction(self.session, settings, ranked)
                return self._pack(fetched, scope_rows)
            if explicit:
                await self.session.execute(text("BEGIN"))
            try:
                lexemes = await self.use_indexes(
                    plan.hnsw_ef_search,
                    goal,
                    custom_plans=not literal_scope,
                    rows=plan.vector_candidates,
                )
                ranked_sql, bound = ranked(lexemes)
                result = await self.session.execute(statement(ranked_sql), bound)
                fetched = result.mappings().all()
            except BaseException:
                if explicit:
                    with contextlib.suppress(Exception):
                        await self.session.execute(text("ROLLBACK"))
                raise
            if explicit:
                await self.session.execute(text("COMMIT"))
            return self._pack(fetched, scope_rows)
        return self._pack(result.mappings().all(), scope_rows)

    @staticmethod
    def _pack(fetched: Any, scope_rows: int) -> RankedPack:
        rows: list[RankedRow] = []
        gated_out = 0
        candidates = 0
        for r in fetched:
            gated_out = int(r["gated_out"])
            candidates = int(r["candidates"])
            if r["id"] is None:
                continue
            rows.append(
                RankedRow(
                    **memory_fields(r),
                    cosine=None if r["cosine"] is None else float(r["cosine"]),
                    lexical=float(r["lexical"] or 0.0),
                    matched=list(r["matched"] or []),
                    prior=float(r["prior"]),
                    score=float(r["score"]),
                    via_id=r["via_id"],
                    via_relationship=r["via_relationship"],
                    related=list(r["related"] or []),
                    expires_at=r["expires_at"],
                )
            )
        return RankedPack(
            rows=rows, gated_out=gated_out, candidates=candidates, scope_rows=scope_rows
        )
