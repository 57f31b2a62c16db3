"""Review 2: one bad turn (a time past year 9999 in UTC, or a session named by a token)
aborted a whole ``ctxpack ingest``, and a rerun stopped at the same turn. Now the turn is
skipped, counted by field, reported, and the run (and a rerun) goes on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from service.domain.ingest import Mapping, read_turns
from service.lifecycle.ingest import (
    Checkpoint,
    HttpTarget,
    IngestSummary,
    ingest,
)
from tests.conftest import Key
from tests.lifecycle.test_ingest import local_target

TOKEN_SESSION = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
ROWS = [
    {"text": "I moved to Lisbon last spring to join a robotics startup.", "speaker": "Ana",
     "timestamp": "2024-04-02T09:00:00Z", "session": 1},
    {"text": "My brother runs a small bakery near the old harbour in Porto.", "speaker": "Ana",
     "timestamp": "9999-12-31T23:00:00-05:00", "session": 1},
    {"text": "We build warehouse robots that sort parcels by weight and size.", "speaker": "Ana",
     "timestamp": "2024-04-02T09:02:00Z", "session": 1},
    {"text": "Our team lunch is every Thursday at the ramen place downstairs.", "speaker": "Ben",
     "timestamp": "2024-04-03T12:00:00Z", "session": TOKEN_SESSION},
    {"text": "My sister adopted a grey kitten called Pixel last weekend.", "speaker": "Ben",
     "timestamp": "2024-05-10T18:00:00Z", "session": 2},
]


def count(url: str, key: Key) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("where", ["local", "http"])
async def test_bad_turns_are_skipped_counted_and_reported(
    where: str, app: FastAPI, pg_url: str, key: Key, tmp_path: Path
) -> None:
    fmt, turns = read_turns("\n".join(json.dumps(r) for r in ROWS))
    ck = tmp_path / "ck.jsonl"

    async def run(target: object) -> IngestSummary:
        with Checkpoint(ck) as checkpoint:
            return await ingest(turns, target, Mapping("ana"), fmt, checkpoint=checkpoint,  # type: ignore[arg-type]
                                summary=IngestSummary(), batch_size=10)

    if where == "local":
        async with local_target(pg_url, key) as target:
            summary = await run(target)
            again = await run(target)
    else:
        target = HttpTarget("http://test", key.key, transport=httpx.ASGITransport(app=app))
        try:
            summary = await run(target)
            again = await run(target)
        finally:
            await target.close()
    assert summary.created == 3
    assert summary.invalid == {"invalid_valid_at": 1, "invalid_namespace": 1}
    assert summary.as_dict()["invalid"] == 2
    assert "skipped as invalid input: 2" in summary.text()
    assert TOKEN_SESSION not in summary.text() and TOKEN_SESSION not in json.dumps(summary.as_dict())
    assert count(pg_url, key) == 3
    # A rerun goes past them: nothing is sent again, nothing stops it.
    assert again.resumed == 5 and again.created == 0
