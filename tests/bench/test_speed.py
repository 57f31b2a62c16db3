"""bench/speed.py: the growth ratio the 1M target is stated in, and the store a later run
measures without seeding."""

from __future__ import annotations

import stat
from pathlib import Path

from bench.speed import BenchStore, growth_ratio


def _size(n: int, p50: float) -> dict[str, object]:
    return {"n": n, "ctxpack": {"context_c1": {"p50_ms": p50}}}


def test_growth_is_the_largest_size_against_100k() -> None:
    sizes = [_size(10_000, 9.0), _size(100_000, 10.0), _size(1_000_000, 11.5)]
    assert growth_ratio(sizes) == {
        "from_n": 100_000,
        "to_n": 1_000_000,
        "from_p50_ms": 10.0,
        "to_p50_ms": 11.5,
        "ratio": 1.15,
        "target": "≤ 1.2",
    }


def test_growth_falls_back_to_the_next_smaller_size_and_needs_two() -> None:
    got = growth_ratio([_size(2_000, 8.0), {"n": 5_000, "skipped": "x"}, _size(20_000, 12.0)])
    assert got is not None
    assert (got["from_n"], got["to_n"], got["ratio"], got["target"]) == (2_000, 20_000, 1.5, None)
    assert growth_ratio([_size(100_000, 10.0)]) is None


def test_the_store_remembers_seeded_sizes_across_runs(tmp_path: Path) -> None:
    store = BenchStore(tmp_path)
    assert store.seeded(1_000) is None
    store.record(1_000, {"users": 10, "key": "ctxp_x", "seed": {"sent": 1_000}})
    again = BenchStore(tmp_path)
    assert again.seeded(1_000) == {"users": 10, "key": "ctxp_x", "seed": {"sent": 1_000}}
    assert again.seeded(2_000) is None
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o600
    assert BenchStore.database("langgraph", 1_000_000) == "bench_langgraph_1000000"
