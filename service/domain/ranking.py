"""How a context pack ranks memories: the query derived from a goal, the fusion of vector and
full-text relevance, the relevance gate, intent type priors, recency and the graph step.

The SQL that applies these numbers lives in ``store/retrieval.py``; the numbers live here.

    relevance = w * cosine + (1 - w) * lexical          (hybrid; w = VECTOR_WEIGHT)
    score     = relevance * prior(type, intent) * domain boost * recency

``cosine`` is MiniLM cosine similarity (computed in SQL as 1 - distance). ``lexical`` is the
memory's BM25 score (k1=0.9, b=0.4) divided by the goal's whole idf mass times (k1 + 1): 1.0
means the memory holds every goal term with a saturated frequency, a memory matching only
one common word scores near 0. On LoCoMo (offline, the same candidate lists) this weighted
sum reached recall@10 68.5% against 57.3% for reciprocal rank fusion (k=60): RRF throws away
the score gaps that tell a strong lexical hit from a weak one.

The relevance gate keeps a candidate when ``cosine >= relevance_floor`` (0.30) or when it
matches the goal's terms (``lexical >= MIN_LEXICAL_SHARE``) with ``cosine >=
lexical_relevance_floor`` (0.15), and its relevance reaches ``RELATIVE_GATE`` of the best
kept candidate's. A goal of several lines is a dialogue: each retriever reads its recent turns
(``goal_query``, domain/goal_focus.py). A goal naming a period ("in June", "last week",
domain/temporal.py) boosts memories whose ``valid_at`` falls in it (``DATE_BOOST``).

Every constant here and both floors were chosen by cross-validation over three corpora
(LoCoMo, an agent's memories, short personal-event chats), flat and ingest-style loads:
``python -m bench.crossval``, docs/context.md "Cross-validated constants".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from service.config import Settings
from service.domain.facets import FACET_OF_TYPE, INTENT_FACETS
from service.domain.goal_focus import focus_goal
from service.domain.temporal import Period
from service.store.retrieval import Mode, RankingPlan

# Hybrid fusion: weight of cosine against the lexical share (cross-validated over 0.2-0.4).
VECTOR_WEIGHT = 0.3
# BM25 constants: lower k1 and b than the textbook 1.2 / 0.75 suit short memories.
BM25_K1 = 0.9
BM25_B = 0.4
# A full-text match counts as relevance evidence from this share of the goal's idf mass.
MIN_LEXICAL_SHARE = 0.10
# The relative gate: a candidate's relevance must also reach this share of the best one's
# (the strictest share that costs no corpus 0.5 recall points; 0.4 costs 1.5).
RELATIVE_GATE = 0.3
# Intent priors: the intent's first facet x1.30, each next one 0.05 less, others x1.0.
PRIOR_TOP = 1.30
PRIOR_STEP = 0.05
DOMAIN_BOOST = 1.10
# Mild recency: a memory written now scores up to 10% more, decaying with a 30-day constant.
RECENCY_WEIGHT = 0.10
RECENCY_DAYS = 30.0
# Graph step: a neighbour pulled in through a relation scores this much of its parent.
GRAPH_DECAY = 0.8

# The goal's dates (domain/temporal.py): a candidate whose valid_at falls in a period the
# goal names scores this much more. A boost only: memories without valid_at are unaffected.
# Cross-validated: 0.3 is level or better on every corpus and load; 0.5 cost the personal
# chats 2.1 R@5 on a held-out fold.
DATE_BOOST = 0.3

# A wide scope (past the exact-scan threshold) reads the full-text matches of its goal's
# rare words only: a lexeme in at least COMMON_TERM_FREQ of all memories scores on those
# matches but is not read whole (store/retrieval.py, selective_hits_ctes), once the table
# holds COMMON_TERM_MIN_ROWS rows (below that every posting list is short).
COMMON_TERM_FREQ = 0.002
COMMON_TERM_MIN_ROWS = 20000

DEFAULT_LIMITS = {"wake": 8, "recall": 24, "deep_search": 50}
# Candidates fetched per retriever: limit x candidate_multiplier, deep_search twice that.
DEEP_SEARCH_CANDIDATE_FACTOR = 2
MIN_CANDIDATES = 40
# The vector side of a hybrid pack fetches limit x this (MIN_CANDIDATES at least,
# deep_search twice), half of full text's: full text backs it, and a wide scope's HNSW
# search need be only as wide as the rows it returns. At the 57k-memory task scope of a
# 100k-memory user, 400 LoCoMo goals gave the same R@5 and R@10 at 48 as at 96 vector
# candidates (398 of 400 packs the same) and the ranking statement took 13% less
# (docs/context.md, 'Big scopes'). Vector-only packs keep candidate_multiplier.
HYBRID_VECTOR_MULTIPLIER = 2

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[\w][\w'.\-]*")


def derive_query(goal: str, domain: str | None) -> str:
    """The retrieval query: the goal, whitespace collapsed, plus the domain when the goal
    does not already name it. Intent words are not added: intent acts through type priors,
    since words like "debug" or "plan" would match memories by vocabulary, not by kind."""
    query = _WS.sub(" ", goal).strip()
    if domain and domain.casefold() not in query.casefold():
        query = f"{query} {domain.strip()}"
    return query


@dataclass(frozen=True)
class GoalQuery:
    """A goal's texts: ``query`` (the whole goal, for match reasons and the markdown),
    ``lexical`` (what full-text search reads) and ``vector`` (what the embedder reads)."""

    query: str
    lexical: str
    vector: str


def goal_query(goal: str, domain: str | None) -> GoalQuery:
    """The texts the retrievers search with: a multi-turn goal focused on its recent turns
    (``goal_focus.focus_goal``), each text through ``derive_query``."""
    focused = focus_goal(goal)
    return GoalQuery(
        query=derive_query(goal, domain),
        lexical=derive_query(focused.lexical, domain),
        vector=derive_query(focused.vector, domain),
    )


def type_priors(intent: str) -> dict[str, float]:
    """Multiplier per memory type for ``intent`` (types of unlisted facets: 1.0)."""
    weights: dict[str, float] = {}
    for rank, facet in enumerate(INTENT_FACETS.get(intent, ())):
        weight = round(PRIOR_TOP - PRIOR_STEP * rank, 4)
        for memory_type, type_facet in FACET_OF_TYPE.items():
            if type_facet == facet:
                weights[memory_type] = weight
    return weights


@dataclass(frozen=True)
class PlanInputs:
    mode: Mode
    layer: str
    intent: str
    query: str
    query_vector: list[float] | None
    limit: int
    domain: str | None
    include_related: bool
    related_limit: int
    periods: list[Period] = field(default_factory=list)


def build_plan(inputs: PlanInputs, settings: Settings) -> RankingPlan:
    """The ranking plan of one call.

    wake (the goal's matches, domain/wake.py): no recency (so the same store always gives
    the same pack), no graph step, no related lists. deep_search: twice the candidates and the graph step (when
    include_related). recall: related lists only."""
    wake = inputs.layer == "wake"
    deep = inputs.layer == "deep_search"
    candidates = max(MIN_CANDIDATES, inputs.limit * settings.candidate_multiplier)
    vector_candidates = (
        candidates
        if inputs.mode == "vector"
        else max(MIN_CANDIDATES, inputs.limit * HYBRID_VECTOR_MULTIPLIER)
    )
    if deep:
        candidates *= DEEP_SEARCH_CANDIDATE_FACTOR
        vector_candidates *= DEEP_SEARCH_CANDIDATE_FACTOR
    priors = type_priors(inputs.intent)
    return RankingPlan(
        mode=inputs.mode,
        query_text=inputs.query,
        query_vector=inputs.query_vector,
        candidates=candidates,
        vector_candidates=vector_candidates,
        limit=inputs.limit,
        vector_weight=VECTOR_WEIGHT,
        relevance_floor=settings.relevance_floor,
        lexical_floor=settings.lexical_relevance_floor,
        min_lexical_share=MIN_LEXICAL_SHARE,
        bm25_k1=BM25_K1,
        bm25_b=BM25_B,
        prior_types=list(priors),
        prior_weights=list(priors.values()),
        domain=inputs.domain,
        domain_boost=DOMAIN_BOOST,
        recency_weight=0.0 if wake else RECENCY_WEIGHT,
        recency_days=RECENCY_DAYS,
        graph_decay=GRAPH_DECAY if (deep and inputs.include_related) else None,
        related_limit=inputs.related_limit if (inputs.include_related and not wake) else 0,
        # The search's width; an iterative scan fills a branch past it (retrieval.index_settings).
        hnsw_ef_search=(
            settings.hnsw_ef_search if inputs.mode == "vector" else settings.hnsw_hybrid_ef_search
        ),
        common_term_freq=COMMON_TERM_FREQ,
        common_term_min_rows=COMMON_TERM_MIN_ROWS,
        relative_gate=RELATIVE_GATE,
        date_starts=[p.start for p in inputs.periods] if DATE_BOOST > 0 else [],
        date_ends=[p.end for p in inputs.periods] if DATE_BOOST > 0 else [],
        date_boost=DATE_BOOST,
    )


def matched_phrases(goal: str, lexemes: list[str]) -> list[str]:
    """The goal's words behind the matched stems, runs of adjacent words joined:
    ``("Add refresh-token rotation", ["refresh", "token"])`` -> ``["refresh-token"]``.

    Stems are Postgres' (snowball): a word matches a stem it starts with, or whose last
    letter is a snowball respelling (``policies`` -> ``polici``, ``happy`` -> ``happi``).
    Remembered per goal and stems: a pack's items share their goal, and many of them the
    same matched stems."""
    return list(_matched_phrases(goal, tuple(s for s in lexemes if s)))


@lru_cache(maxsize=1024)
def _matched_phrases(goal: str, stems: tuple[str, ...]) -> tuple[str, ...]:
    if not stems:
        return ()
    phrases: list[str] = []
    run: list[str] = []
    # The respelling rule's prefixes: a part starting with none of them skips the rule.
    respelt = tuple(s[:-1] for s in stems if len(s) > 3)
    for word, parts in _goal_words(goal):
        if any(
            p.startswith(stems) or (p.startswith(respelt) and _respelt(p, stems)) for p in parts
        ):
            run.append(word)
        elif run:
            phrases.append(" ".join(run))
            run = []
    if run:
        phrases.append(" ".join(run))
    return tuple(phrases)


_WORD_PARTS = re.compile(r"[-'.]")


@lru_cache(maxsize=256)
def _goal_words(goal: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``goal``'s words, each with its casefolded parts (split at hyphens, apostrophes and
    dots; the whole word when it has none): one pack asks for every item's matched
    phrases of the same goal, and splitting it took most of an item's build time."""
    words = []
    for word in _WORD.findall(goal):
        low = word.casefold()
        parts = tuple(p for p in _WORD_PARTS.split(low) if p) or (low,)
        words.append((word, parts))
    return tuple(words)


def _respelt(word: str, stems: Sequence[str]) -> bool:
    """``word`` matches a stem whose last letter snowball respelled (``happy`` ->
    ``happi``): it starts with all of the stem but that letter, and is at most three
    letters longer than the stem."""
    return any(len(s) > 3 and word.startswith(s[:-1]) and len(word) <= len(s) + 3 for s in stems)
