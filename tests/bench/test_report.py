"""bench/report.py: the speed rows' ratios and the Markdown tables the run prints and the
README carries."""

from __future__ import annotations

import math
from typing import Any

from bench.report import fmt, markdown_tables, ratio, speed_rows

SIZE = {
    "n": 10_000,
    "users": 100,
    "stored_total": 10_050,
    "ctxpack": {
        "context_c1": {"p50_ms": 10.0, "p95_ms": 14.0, "p99_ms": 20.0, "per_s": 90.0},
        "remember_batch": {"per_s": 400.0},
        "seed": {"method": "copy", "sent": 10_000, "seconds": 30.0, "embed_seconds": 25.0},
    },
    "langgraph": {"search_c1": {"p50_ms": 5.0, "per_s": 180.0}, "write_batch": {"per_s": 200.0}},
    "mem0": {},
}


def test_ratio_says_how_many_times_better_ctxpack_is() -> None:
    assert ratio(10.0, 20.0, lower_is_better=True) == 2.0
    assert ratio(400.0, 200.0, lower_is_better=False) == 2.0
    assert ratio(None, 20.0, lower_is_better=True) is None
    assert ratio(10.0, math.nan, lower_is_better=True) is None


def test_speed_rows_pair_each_metric_with_the_peers() -> None:
    rows = {r["metric"]: r for r in speed_rows(SIZE)}
    p50 = rows["context / search p50 ms, c=1"]
    assert (p50["ctxpack"], p50["langgraph"], p50["x_langgraph"]) == (10.0, 5.0, 0.5)
    assert p50["mem0"] is None and p50["x_mem0"] is None
    assert rows["batch write memories/s"]["x_langgraph"] == 2.0
    assert rows["results per call, c=1 (asked: 24)"]["x_langgraph"] is None


def test_fmt_renders_missing_and_numbers() -> None:
    assert fmt(None) == "–"
    assert fmt(math.nan) == "–"
    assert fmt(1234.56) == "1,234.6"
    assert fmt(1234) == "1,234"


def test_markdown_tables_carry_the_speed_table_and_skipped_sizes() -> None:
    res = {"speed": {"sizes": [SIZE, {"n": 1_000_000, "skipped": "over budget"}]}}
    text = "\n".join(markdown_tables(res))
    assert "**Speed, 10,000 memories seeded** (10,050 stored in ctxpack, over 100 users" in text
    assert "| context / search p50 ms, c=1 | 10.0 | 5.0 | – | 0.50 | – | ≤ 10 |" in text
    assert "**Speed, 1,000,000 memories**: skipped: over budget" in text


def test_the_scope_table_sets_ctxpack_beside_langgraph() -> None:
    scope = {
        "k": 24,
        "sizes": [
            {
                "n": 100_000,
                "ctxpack": {"p50_ms": 30.0, "p99_ms": 60.0, "mean_hits": 20.0},
                "langgraph": {"p50_ms": 15.0, "p99_ms": 30.0, "mean_hits": 24.0},
            }
        ],
    }
    text = "\n".join(markdown_tables({"speed": {"scope": scope}}))
    assert "**Scope scaling** (one namespace holding N memories" in text
    assert "| 100,000 | 30.0 | 60.0 | 15.0 | 30.0 | 0.50 | 20.0 | 24.0 |" in text


def test_growth_and_reused_vectors_are_said() -> None:
    big = dict(SIZE, n=1_000_000, mem0_skipped="mem0 left out")
    big["ctxpack"] = dict(
        SIZE["ctxpack"],
        seed={"method": "copy", "vectors_reused": 900_000, "seed_method": "reused vectors: x"},
    )
    growth = {"from_n": 100_000, "to_n": 1_000_000, "from_p50_ms": 10.0, "to_p50_ms": 11.0}
    growth |= {"ratio": 1.1, "target": "≤ 1.2"}
    text = "\n".join(markdown_tables({"speed": {"sizes": [big], "growth": growth}}))
    assert "Vectors at this size: reused vectors: x." in text
    assert "mem0: mem0 left out." in text
    assert "at 1,000,000 memories against 10.00 ms at 100,000: ×1.10 (target ≤ 1.2)." in text


def test_a_bulk_load_says_its_index_builds_and_what_was_settled() -> None:
    seed: dict[str, Any] = {"method": "copy", "sent": 10_000, "seconds": 30.0}
    seed |= {"index_build_s": {"ix_memories_tsv": 1.2}, "settle_s": {"memories": 3.4}}
    peer_seed: dict[str, Any] = {"seconds": 5.0}
    peer_seed["index_build_s"] = {"store_vectors_embedding_idx": 4.4}
    peer_seed["settle_s"] = {"store": 0.5, "store_vectors": 1.5}
    size: dict[str, Any] = {**SIZE, "ctxpack": {"seed": seed}, "peer_seed": peer_seed}
    text = "\n".join(markdown_tables({"speed": {"sizes": [size]}}))
    assert "built again from their own definitions (ix_memories_tsv 1.2 s)." in text
    assert "rebuilt likewise (store_vectors_embedding_idx 4.4 s)." in text
    assert (
        "Then the loaded tables were vacuumed and analyzed before anything was timed "
        "(VACUUM (ANALYZE): memories 3.4 s; the peers' store 0.5 s, store_vectors 1.5 s)."
    ) in text


def test_writes_not_all_stored_print_why_instead_of_a_rate() -> None:
    invalid = "invalid: 1,000 of 1,000 were duplicates"
    size = dict(
        SIZE, ctxpack=dict(SIZE["ctxpack"], remember_batch={"sent": 1_000, "invalid": invalid})
    )
    rows = {r["metric"]: r for r in speed_rows(size)}
    assert rows["batch write memories/s"]["ctxpack"] == invalid
    assert rows["batch write memories/s"]["x_langgraph"] is None
    text = "\n".join(markdown_tables({"speed": {"sizes": [size]}}))
    assert f"| batch write memories/s | {invalid} | 200.0 | – | – | – | ≥ 400 |" in text


def test_a_valid_batch_sits_beside_the_embedders_pace_on_its_texts() -> None:
    batch = {"sent": 1_000, "stored": 1_000, "created": 1_000, "with_near_duplicates": 3}
    batch |= {"seconds": 4.0, "per_s": 250.0, "of_embedder": 0.625}
    batch["embedder"] = {"texts": 1_000, "seconds": 2.5, "per_s": 400.0}
    ctx = dict(SIZE["ctxpack"], remember_batch=batch, remember_single={"stored": 105})
    text = "\n".join(markdown_tables({"speed": {"sizes": [dict(SIZE, ctxpack=ctx)]}}))
    assert "| embedder alone on the batch's texts, texts/s | 400.0 | – | – | – | – |  |" in text
    assert "| batch write ÷ embedder alone | 0.62 | – | – | – | – | ≥ 0.8 |" in text
    assert "the batch stored 1,000 of 1,000 and the single writes 105; 3 of the batch" in text
    assert "embedded exactly the 1,000 texts the batch stored, in its batches, in 2.5 s." in text


def test_an_interleaved_pace_says_so_with_its_spread() -> None:
    batch = {"sent": 1_000, "stored": 1_000, "created": 1_000, "with_near_duplicates": 0}
    batch |= {"seconds": 4.0, "per_s": 250.0, "of_embedder": 0.83}
    batch["embedder"] = {
        "texts": 1_000,
        "seconds": 3.3,
        "per_s": 303.0,
        "interleaved": True,
        "of_embedder_per_batch": [0.71, 0.84, 0.9],
    }
    ctx = dict(SIZE["ctxpack"], remember_batch=batch, remember_single={"stored": 105})
    text = "\n".join(markdown_tables({"speed": {"sizes": [dict(SIZE, ctxpack=ctx)]}}))
    assert (
        "in its batches, in 3.3 s, each batch of the service followed by the embedder on its "
        "texts (batch write ÷ embedder alone per batch: lowest 0.71, median 0.84, highest 0.90)."
    ) in text
