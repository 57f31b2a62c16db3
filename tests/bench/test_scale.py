"""bench/scale.py: the plan of calls, the figures it derives, the orgs and keys it writes
directly, and (slow) one small run end to end on a real Citus cluster."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import httpx
import pytest

from bench.scale import (
    BIG,
    PREFIX,
    SMALL,
    USERS_PER_ORG,
    Size,
    blocks,
    context_plan,
    cost_ratios,
    latency_summary,
    make_keys,
    markdown,
    overlap,
    parse_size,
    recall,
    routed_share,
    write_orgs,
    write_plan,
)
from service.store.database import libpq_url

ROOT = Path(__file__).resolve().parents[2]


def test_sizes_are_the_issues_and_spread_memories_over_two_users_an_org() -> None:
    assert (SMALL.memories, SMALL.orgs, SMALL.per_user) == (100_000, 1_000, 50)
    assert (BIG.memories, BIG.orgs, BIG.per_user) == (1_000_000, 10_000, 50)
    assert SMALL.database != BIG.database
    assert SMALL.label == "100k memories / 1k orgs" and BIG.label == "1M memories / 10k orgs"
    assert parse_size("10000:100") == Size(10_000, 100)
    for bad in ("10000", "a:b", "1:10", "10:0"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_size(bad)


def test_calls_go_to_a_random_orgs_own_namespaces_the_same_on_every_run() -> None:
    plan = context_plan(1000, 500, seed=1)
    assert plan == context_plan(1000, 500, seed=1)
    assert len({org for org, _ in plan}) > 300  # spread over the orgs
    assert all(0 <= org < 1000 for org, _ in plan)
    users = {ns.split(":")[0] for _, ns in plan}
    assert users == {f"{PREFIX}u{u}" for u in range(USERS_PER_ORG)}
    assert all(ns.count(":") == 2 for _, ns in plan)  # a task namespace, as seeded
    writes = write_plan(1000, 50, seed=2)
    assert all(ns.endswith(":w") and ns.startswith(f"{PREFIX}u") for _, ns in writes)


def test_blocks_cover_every_call_once() -> None:
    assert [list(b) for b in blocks(7, 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert blocks(0, 3) == []


def test_figures() -> None:
    s = latency_summary([float(i) for i in range(1, 101)])
    assert s["n"] == 100 and 50 <= s["p50_ms"] <= 51 and 99 <= s["p99_ms"] <= 100
    assert s["mean_ms"] == 50.5
    assert overlap(["a", "b", "c", "d"], ["a", "b", "c", "e"]) == 0.75
    assert overlap(["a", "b"], ["a", "b", "c", "d"]) == 0.5  # a shorter pack misses items
    assert overlap([], []) == 1.0
    assert recall(["a", "x"], ["a", "b"]) == 0.5 and recall([], []) == 1.0
    assert routed_share([("remember", 10, 9, 1), ("context", 5, 10, 0)]) == 19 / 20
    assert routed_share([]) == 1.0


def _engine(p50: float, p99: float, ms_per_memory: float) -> dict[str, object]:
    return {
        "context": {"p50_ms": p50, "p99_ms": p99},
        "writes": {"ms_per_memory": ms_per_memory, "memories_per_s": 1000 / ms_per_memory,
                   "db_share": 0.4},
    }  # fmt: skip


def test_the_cost_ratio_is_the_big_sizes_figure_over_the_small_ones() -> None:
    ratios = cost_ratios(_engine(10, 20, 2.0), _engine(11, 30, 2.0))
    assert ratios == {"context_p50": 1.1, "context_p99": 1.5, "write_ms_per_memory": 1.0}
    report = {
        "sizes": {SMALL.label: {"node": _engine(10, 20, 2.0), "cluster": _engine(20, 40, 3.0)}},
        "ratio_of": "big / small",
        "ratios": {"node": ratios},
        "routing": {"phases": [("remember", 10, 9, 1)], "share": 0.9},
    }
    table = markdown(report)
    assert (
        "| 100k memories / 1k orgs | cluster | 20.0 ms | 40.0 ms | 333 memories/s | 40% |" in table
    )
    assert "| node (big / small) | 1.10 | 1.50 | 1.00 |" in table
    assert "| **routed** | | 90.0% | |" in table


async def test_orgs_and_keys_written_directly_authenticate(
    pg_url: str, client: httpx.AsyncClient
) -> None:
    orgs = make_keys(2, f"scale-{uuid.uuid4().hex[:8]}")
    write_orgs(libpq_url(pg_url), orgs)
    for org in orgs:
        r = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {org['key']}"})
        assert r.status_code == 200, r.text
        assert r.json()["org_id"] == org["org_id"]


@pytest.mark.slow
def test_a_small_run_end_to_end_on_both_engines() -> None:
    """Seeds 2k memories over 20 orgs (and a 2k HNSW scope) on one node and on a 3-node Citus
    cluster, measures, then measures again from the kept store without seeding."""
    if shutil.which("clang") is None:
        pytest.skip("building Citus needs clang")
    # Not under pytest's tmp_path: as root, PostgreSQL runs as another user, who must reach it.
    tmp = Path(tempfile.mkdtemp(prefix="ctxpack-scale-test-"))
    tmp.chmod(0o755)
    try:
        _small_run(tmp / "store", tmp / "scale.json")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bench(args: list[str]) -> None:
    """``python -m bench.scale ARGS``, as it is run (a process each: one run, one node)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "bench.scale", *args], cwd=ROOT, env=env, check=True,
                   timeout=900)  # fmt: skip


def _small_run(store: Path, out: Path) -> None:
    common = ["--store", str(store), "--size", "2000:20", "--hnsw", "--hnsw-rows", "2000"]
    small = ["--requests", "40", "--batches", "2", "--batch-size", "20", "--db-batches", "2",
             "--hnsw-goals", "10", "--out", str(out)]  # fmt: skip
    _bench([*common, "--seed-only"])
    seeded = json.loads((store / "manifest.json").read_text())["seeded"]
    assert set(seeded) == {f"{e}:{d}" for e in ("node", "cluster")
                           for d in ("scale_2000_20", "scale_hnsw_2000")}  # fmt: skip
    _bench([*common, "--measure-only", *small])
    report = json.loads(out.read_text())
    for engine in ("node", "cluster"):
        measured = report["sizes"]["2k memories / 20 orgs"][engine]
        assert measured["context"]["n"] == 40
        assert measured["writes"]["created"] == 40
    assert report["routing"]["share"] == 1.0
    assert report["hnsw"]["exact_equal"] == 1.0
    assert report["hnsw"]["overlap"]["vector"] >= 0.95
    # Nothing was seeded again.
    assert json.loads((store / "manifest.json").read_text())["seeded"] == seeded
