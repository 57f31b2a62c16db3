"""bench/quality.py: evidence recall, the BM25 baseline and how a pack's items map back to
LoCoMo turns."""

from __future__ import annotations

import pytest

from bench.quality import BM25, ranked_sources, recall_table


def test_recall_is_the_share_of_gold_turns_in_the_top_k() -> None:
    queries = [
        {"qid": "q1", "gold_ids": ["a", "b"], "category_name": "single-hop"},
        {"qid": "q2", "gold_ids": ["z"], "category_name": "temporal"},
    ]
    ranked = {"q1": ["x", "a", "y", "w", "v", "b"], "q2": []}
    table = recall_table(ranked, queries)
    assert table["overall"]["r@5"] == pytest.approx(0.25)  # (1/2 + 0) / 2
    assert table["overall"]["r@10"] == pytest.approx(0.5)
    assert table["by_category"]["single-hop"]["r@10"] == 1.0
    assert table["queries_with_fewer_than_10_hits"] == 2


def test_bm25_ranks_the_document_with_the_rare_term_first() -> None:
    docs = ["the cat sat", "the dog sat", "a parrot spoke", "the cat and the dog"]
    assert BM25(docs).top("parrot", 2)[0] == 2


def test_ranked_sources_are_the_turns_of_the_pack_best_score_first() -> None:
    pack = {
        "sections": [
            {"items": [{"id": "m1", "score": 0.2}, {"id": "m2", "score": 0.9}]},
            {"items": [{"id": "m3", "score": 0.5, "source": "t9"}]},
        ]
    }
    assert ranked_sources(pack, {"m1": ["t1"], "m2": ["t2", "t1"]}) == ["t2", "t1", "t9"]
