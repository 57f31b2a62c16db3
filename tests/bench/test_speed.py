"""bench/speed.py: the growth ratio the 1M target is stated in, the store a later run
measures without seeding, and the measured writes a later run sends to that store."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

import httpx

from bench.report import speed_rows
from bench.speed import BenchStore, growth_ratio, measure_ctxpack
from service.domain.writes.prepare import document_text
from tests.bench.conftest import Recording
from tests.conftest import KeyFactory, SqlRows


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


LOCOMO = ["Melanie: We went camping in the mountains last weekend with the kids."]


async def test_a_second_run_on_a_kept_store_writes_texts_new_to_it(
    live_server: str, make_key: KeyFactory, sql: SqlRows
) -> None:
    """Two runs of the measured writes against one store, each marked by what the store
    holds before it (as run_speed marks them): the second run's batch and singles are all
    stored, and the embedder is timed on exactly the batch's stored texts. Sent again under
    the first run's mark, every item is a duplicate and no rate is given."""
    key = await make_key()
    args = argparse.Namespace(requests=1, singles=3, batch_sample=12)

    async def held() -> int:
        rows = await sql("SELECT count(*) FROM memories WHERE org_id = :o", o=key.org_id)
        return int(rows[0][0])

    with httpx.Client(base_url=live_server, headers=key.headers, timeout=60) as client:
        marks, runs = [], []
        for _ in range(2):
            marks.append(await held())
            embedder = Recording()
            runs.append(
                (measure_ctxpack(client, 3, args, 7, LOCOMO, 1_000, marks[-1], embedder), embedder)
            )
        again = measure_ctxpack(client, 3, args, 7, LOCOMO, 1_000, marks[0], Recording())

    assert marks == [0, 20]  # 8 singles (5 of them warm-up) and 12 in the batch
    for out, _ in runs:
        batch = out["remember_batch"]
        assert (batch["sent"], batch["stored"], batch["created"]) == (12, 12, 12)
        assert "invalid" not in batch and batch["per_s"] > 0
        assert batch["embedder"]["texts"] == 12 and batch["of_embedder"] > 0
        assert out["remember_single"]["stored"] == 8 and "invalid" not in out["remember_single"]
        assert out["remember_single"]["p50_ms"] > 0
    second_batch = runs[1][1].calls[1:]  # after the warm-up call
    stored = await sql(
        "SELECT name, content FROM memories WHERE org_id = :o AND source LIKE :s ORDER BY source",
        o=key.org_id,
        s=f"batch1000-{marks[1]}.%",
    )
    assert sorted(t for call in second_batch for t in call) == sorted(
        document_text(name, content) for name, content in stored
    )
    assert again["remember_batch"]["invalid"] == "invalid: 12 of 12 were duplicates"
    assert "per_s" not in again["remember_batch"] and "embedder" not in again["remember_batch"]
    assert again["remember_single"]["invalid"] == "invalid: 8 of 8 were duplicates"
    assert "p50_ms" not in again["remember_single"]
    rows = {r["metric"]: r for r in speed_rows({"ctxpack": again})}
    assert rows["batch write memories/s"]["ctxpack"] == "invalid: 12 of 12 were duplicates"
    assert rows["batch write memories/s"]["x_langgraph"] is None
