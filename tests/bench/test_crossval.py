"""bench/crossval.py: the Python replica of the pack's score (gate, relative gate, prior,
graph step) and the folds."""

from __future__ import annotations

import numpy as np

from bench.crossval import FOLDS, Candidates, Params, Ranker, folds_of, rank, recall

DEFAULTS = Params(vector_weight=0.3, floor=0.30, lexical_floor=0.20, min_share=0.10)


def _cands(rows: list[tuple[str, float, float]], prior: float = 1.0) -> Candidates:
    return Candidates(
        ids=[r[0] for r in rows],
        cosine=np.array([r[1] for r in rows]),
        lexical=np.array([r[2] for r in rows]),
        prior=np.array([prior] * len(rows)),
    )


def test_the_gate_keeps_cosine_or_lexical_evidence() -> None:
    c = _cands([("a", 0.5, 0.0), ("b", 0.25, 0.3), ("c", 0.25, 0.05), ("d", 0.1, 0.9)])
    assert rank(c, DEFAULTS, None) == ["b", "a"]  # b: 0.3 x 0.25 + 0.7 x 0.3


def test_the_relative_gate_drops_what_is_far_below_the_best() -> None:
    c = _cands([("a", 0.9, 0.9), ("b", 0.31, 0.0)])
    assert rank(c, DEFAULTS, None) == ["a", "b"]
    assert rank(c, Params(0.3, 0.30, 0.20, 0.10, relative_gate=0.5), None) == ["a"]


def test_the_graph_step_pulls_neighbours_at_a_decayed_score() -> None:
    c = _cands([("a", 0.9, 0.0)] + [(f"x{i}", 0.35, 0.0) for i in range(12)])
    ranked = rank(c, DEFAULTS, {"a": {"n"}})
    assert ranked[:2] == ["a", "n"]
    assert len(ranked) == 10


def test_the_memo_ranks_again_when_the_constants_change() -> None:
    c = _cands([("a", 0.5, 0.0), ("b", 0.32, 0.0)])
    ranker = Ranker()
    assert ranker(c, DEFAULTS, None) == ["a", "b"]
    assert ranker(c, Params(0.3, 0.40, 0.20, 0.10), None) == ["a"]


def test_folds_split_groups_evenly_and_recall_counts_gold() -> None:
    folds = folds_of(["g2", "g1", "g3", "g1", "g4"])
    assert folds == {"g1": 0, "g2": 1, "g3": 2, "g4": 0}
    assert set(folds.values()) == set(range(FOLDS))
    assert recall(["a", "b"], ["b", "x", "a"], 2) == 0.5


def test_smoothing_lifts_a_candidate_next_to_a_strong_one() -> None:
    c = _cands([("a", 0.9, 0.9), ("b", 0.40, 0.0), ("c", 0.42, 0.0)])
    assert rank(c, DEFAULTS, {}) == ["a", "c", "b"]
    links = {"a": {"b"}, "b": {"a"}}
    smoothed = Params(0.3, 0.30, 0.20, 0.10, smooth=0.2)
    assert rank(c, smoothed, links) == ["a", "b", "c"]
