"""bench/query_lane.py: what its quality and timing reports compute (the runs themselves use
the model and the database, and timings are never asserted)."""

from __future__ import annotations

import math

import numpy as np

from bench.query_lane import agreement, cosine_summary, latency_summary, recall, vector_text


def test_cosine_summary_of_paired_rows() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    b = np.array([[1.0, 0.0], [0.6, 0.8], [2.0, 0.0]])  # any length: cosines, not dots
    s = cosine_summary(a, b)
    assert s["n"] == 3
    assert s["min"] == 0.8
    assert math.isclose(s["mean"], round((1 + 0.8 + 1) / 3, 5))
    assert 0.8 <= s["p1"] < 0.81


def test_recall_is_the_share_of_gold_in_the_top_k_in_points() -> None:
    queries = [{"gold_ids": ["a", "b"]}, {"gold_ids": ["c"]}]
    ranked = [["a", "x", "b"], ["y", "c"]]
    assert recall(queries, ranked, 1) == 25.0
    assert recall(queries, ranked, 2) == 75.0
    assert recall(queries, ranked, 3) == 100.0


def test_agreement_counts_identical_packs_and_their_overlap() -> None:
    fp32 = [["a", "b", "c"], ["a", "b"], [], ["a"]]
    int8 = [["a", "b", "c"], ["b", "a"], [], ["z"]]
    assert agreement(fp32, int8, k=3) == {"same_top": 50.0, "overlap": 75.0}
    # Only the top k counts.
    assert agreement([["a", "b", "c"]], [["a", "b", "d"]], k=2)["same_top"] == 100.0


def test_latency_summary_uses_the_bench_percentile() -> None:
    wall = [float(i) for i in range(1, 101)]
    s = latency_summary(wall, [2.0, 4.0])
    assert s == {"p50": 50.5, "p99": 99.01, "cpu": 3.0}


def test_the_goal_is_embedded_as_a_context_call_embeds_it() -> None:
    assert vector_text("  what   did Caroline\nsay? ") == "what did Caroline say?"
