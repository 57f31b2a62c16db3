"""service/domain/ranking.py: the query, the intent priors and the plan of each layer."""

from __future__ import annotations

import pytest

from service.config import Settings
from service.domain.facets import FACET_OF_TYPE, INTENT_FACETS
from service.domain.ranking import (
    DEEP_SEARCH_CANDIDATE_FACTOR,
    MIN_CANDIDATES,
    PRIOR_STEP,
    PRIOR_TOP,
    PlanInputs,
    build_plan,
    derive_query,
    matched_phrases,
    type_priors,
)
from service.store.retrieval import Mode


def _inputs(
    layer: str, *, limit: int = 10, include_related: bool = True, mode: Mode = "hybrid"
) -> PlanInputs:
    return PlanInputs(
        mode=mode,
        layer=layer,
        intent="build",
        query="rotate the refresh tokens",
        query_vector=[0.0] * 384,
        limit=limit,
        domain=None,
        include_related=include_related,
        related_limit=3,
    )


def test_the_query_is_the_goal_plus_an_unnamed_domain() -> None:
    assert derive_query("  fix   the\nlogin ", None) == "fix the login"
    assert derive_query("fix the login", "auth") == "fix the login auth"
    assert derive_query("fix the Auth login", "auth") == "fix the Auth login"


def test_priors_follow_the_intent_order() -> None:
    priors = type_priors("debug")
    first = INTENT_FACETS["debug"][0]
    top_types = [t for t, f in FACET_OF_TYPE.items() if f == first]
    assert top_types and all(priors[t] == PRIOR_TOP for t in top_types)
    second = [t for t, f in FACET_OF_TYPE.items() if f == INTENT_FACETS["debug"][1]]
    assert all(priors[t] == pytest.approx(PRIOR_TOP - PRIOR_STEP) for t in second)
    assert type_priors("general") == {}


def test_wake_is_stable_recall_has_related_deep_has_more_candidates(settings: Settings) -> None:
    wake = build_plan(_inputs("wake"), settings)
    recall = build_plan(_inputs("recall"), settings)
    deep = build_plan(_inputs("deep_search"), settings)
    # wake: no recency (same store, same pack), no graph step, no related lists
    assert wake.recency_weight == 0.0 and wake.graph_decay is None and wake.related_limit == 0
    assert recall.recency_weight > 0 and recall.related_limit == 3 and recall.graph_decay is None
    assert deep.graph_decay is not None
    assert deep.candidates == recall.candidates * DEEP_SEARCH_CANDIDATE_FACTOR
    assert recall.candidates >= MIN_CANDIDATES
    assert recall.relevance_floor == settings.relevance_floor
    no_related = build_plan(_inputs("deep_search", include_related=False), settings)
    assert no_related.graph_decay is None and no_related.related_limit == 0


def test_hnsw_searches_wider_when_the_vector_side_decides_alone() -> None:
    settings = Settings(hnsw_ef_search=210, hnsw_hybrid_ef_search=110)
    assert build_plan(_inputs("recall", mode="vector"), settings).hnsw_ef_search == 210
    assert build_plan(_inputs("recall"), settings).hnsw_ef_search == 110
    # the search's width, whatever a branch returns: the iterative scan fills it past that
    deep = build_plan(_inputs("deep_search", limit=40), settings)
    assert deep.vector_candidates > deep.hnsw_ef_search == 110


def test_a_hybrid_packs_vector_side_fetches_half_of_full_texts_candidates() -> None:
    """limit x 2 vector candidates (40 at least, deep_search twice) against full text's
    limit x 4; a vector-only pack's vector side fetches all of them. The HNSW search's width
    is the setting's (``retrieval.index_settings`` floors it where no iterative scan fills a
    branch past it)."""
    settings = Settings()
    recall = build_plan(_inputs("recall", limit=24), settings)
    assert (recall.candidates, recall.vector_candidates) == (96, 48)
    assert recall.hnsw_ef_search == settings.hnsw_hybrid_ef_search == 40
    deep = build_plan(_inputs("deep_search", limit=50), settings)
    assert (deep.candidates, deep.vector_candidates) == (400, 200)
    small = build_plan(_inputs("deep_search", limit=10), settings)
    assert (small.candidates, small.vector_candidates) == (80, 80)
    alone = build_plan(_inputs("recall", limit=24, mode="vector"), settings)
    assert alone.vector_candidates == alone.candidates == 96
    assert alone.hnsw_ef_search == settings.hnsw_ef_search


def test_matched_phrases_join_adjacent_words() -> None:
    assert matched_phrases("Add refresh-token rotation", ["refresh", "token"]) == ["refresh-token"]
    assert matched_phrases("the policies of happy users", ["polici", "happi"]) == [
        "policies",
        "happy",
    ]
    assert matched_phrases("anything", []) == []


def test_matched_phrases_apply_both_stem_rules_to_every_part() -> None:
    """A part matches a stem it starts with, or (a stem of four letters or more) the stem
    but its last letter when the part is at most three letters longer; hyphens,
    apostrophes and dots split a word into parts, any of which may match."""
    # "cities" starts with the stem; "city" and "cit" with the stem but its last letter
    assert matched_phrases("cities city cit", ["citi"]) == ["cities city cit"]
    # too long for the respelling rule (more than three letters past the stem)
    assert matched_phrases("citadelle", ["citi"]) == []
    # a stem of three letters has no respelling rule
    assert matched_phrases("ca", ["cat"]) == []
    assert matched_phrases("re-run O'Neil's e.g.", ["run", "neil"]) == ["re-run O'Neil's"]
    assert matched_phrases("Happy, HAPPY happiness!", ["happi"]) == ["Happy HAPPY happiness"]
    assert matched_phrases("a b c", ["", "b"]) == ["b"]


def test_a_dialogue_goal_gives_each_retriever_its_focused_text() -> None:
    from service.domain.ranking import goal_query

    goal = "Sam: hi!\nLeo: hello\nSam: how was the trip to Kyoto?"
    texts = goal_query(goal, "travel")
    assert texts.query == "Sam: hi! Leo: hello Sam: how was the trip to Kyoto? travel"
    assert texts.lexical == "trip Kyoto travel"
    assert texts.vector == "Leo: hello Sam: how was the trip to Kyoto? travel"
    one_line = goal_query("rotate the refresh tokens", None)
    assert one_line.query == one_line.lexical == one_line.vector == "rotate the refresh tokens"
