"""bench/harness.py: the load driver counts every call and every error."""

from __future__ import annotations

import pytest

from bench.harness import lat_stats, run_load


def test_run_load_measures_each_job_once_and_counts_errors() -> None:
    seen: list[int] = []

    def call(job: int) -> None:
        seen.append(job)
        if job == 7:
            raise ValueError("boom")

    out = run_load(call, list(range(12)), concurrency=3, warmup=2)
    assert sorted(seen) == list(range(12))  # the first 2 run unmeasured, as warm-up
    assert (out["n"], out["errors"], out["concurrency"]) == (10, 1, 3)
    assert "ValueError('boom')" in out["first_errors"][0]


def test_lat_stats_percentiles() -> None:
    out = lat_stats([float(x) for x in range(1, 101)], wall_s=2.0)
    assert out["p50_ms"] == pytest.approx(50.5)
    assert out["per_s"] == 50.0
