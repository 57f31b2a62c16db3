"""review29 probes: ingest turns that are bad in other ways than issue 29's two."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
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
from tests.e2e.review2.test_ingest_skips_bad_turns import count
from tests.lifecycle.test_ingest import local_target

GOOD = {"text": "I moved to Lisbon last spring to join a robotics startup.", "speaker": "Ana",
        "timestamp": "2024-04-02T09:00:00Z", "session": 1}
BAD = {
    "speaker token": {**GOOD, "text": "We sort parcels by weight.", "speaker": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"},
    "speaker long": {**GOOD, "text": "We sort parcels by size.", "speaker": "S" * 5000},
    "session long": {**GOOD, "text": "Lunch is on Thursday.", "session": "x" * 5000},
    "session colon": {**GOOD, "text": "Lunch is on Friday.", "session": "a:b:c:d"},
    "text huge": {**GOOD, "text": "The robots are fast. " * 20000},
    "text NUL": {**GOOD, "text": "A kitten \u0000 called Pixel."},
    "timestamp year 0": {**GOOD, "text": "A dog called Rex.", "timestamp": "0000-01-01T00:00:00Z"},
    "timestamp year 1 minus": {**GOOD, "text": "A cat called Tom.", "timestamp": "0001-01-01T00:00:00+05:00"},
    "empty text": {**GOOD, "text": "   "},
}


@pytest.mark.parametrize("where", ["local", "http"])
@pytest.mark.parametrize("what", list(BAD))
async def test_bad_turn_kinds_are_skipped(
    where: str, what: str, app: FastAPI, pg_url: str, key: Key, tmp_path: Path
) -> None:
    rows = [GOOD, BAD[what], {**GOOD, "text": "My sister adopted a grey kitten called Pixel."}]
    fmt, turns = read_turns("\n".join(json.dumps(r) for r in rows))
    ck = tmp_path / "ck.jsonl"

    async def run(target: object) -> IngestSummary:
        with Checkpoint(ck) as checkpoint:
            return await ingest(turns, target, Mapping("ana"), fmt, checkpoint=checkpoint,  # type: ignore[arg-type]
                                summary=IngestSummary(), batch_size=10)

    if where == "local":
        async with local_target(pg_url, key) as target:
            summary = await run(target)
    else:
        target = HttpTarget("http://test", key.key, transport=httpx.ASGITransport(app=app))
        try:
            summary = await run(target)
        finally:
            await target.close()
    assert count(pg_url, key) >= 2, summary.as_dict()
