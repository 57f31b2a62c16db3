"""bench/context_speed.py's layouts mode: issue 26's big-scope ratio, every layout asked
call by call on one server."""

from __future__ import annotations

import httpx
import pytest

from bench.context_speed import measure_layouts, parse_layouts
from tests.conftest import KeyFactory


def test_layouts_are_prefix_and_users_and_want_two() -> None:
    assert parse_layouts("speed-:1000, big-:1") == [("speed-", 1000), ("big-", 1)]
    assert parse_layouts("a:b-:2,c-:3") == [("a:b-", 2), ("c-", 3)]
    for bad in ("speed-,big-:1", "speed-:0,big-:1", ":3,big-:1"):
        with pytest.raises(ValueError, match="a layout is PREFIX:USERS"):
            parse_layouts(bad)
    for too_few in ("speed-:1000", ""):
        with pytest.raises(ValueError, match="at least 2 layouts"):
            parse_layouts(too_few)
    assert parse_layouts("big-:1", least=1) == [("big-", 1)]


async def test_every_layout_is_asked_alike_and_set_against_the_first(
    live_server: str, make_key: KeyFactory
) -> None:
    key = await make_key()
    with httpx.Client(base_url=live_server, headers=key.headers, timeout=60) as client:
        response = client.post(
            "/v1/remember",
            json={
                "namespace": "full-u0",
                "type": "decision",
                "content": "We chose Postgres full-text search for support group questions "
                "because the team already runs Postgres.",
            },
        )
        assert response.status_code == 201, response.text
    goals = [f"Why did we choose Postgres full-text search, take {i}?" for i in range(12)]
    report = await measure_layouts(
        live_server, key.key, [("full-", 1), ("empty-", 2)], 6, "hybrid", goals
    )
    rows = report["layouts"]
    assert list(rows) == ["full-", "empty-"]
    assert [rows[p]["calls"] for p in rows] == [6, 6]
    assert rows["empty-"]["mean_items"] == 0
    assert rows["full-"]["mean_items"] > 0  # the goals name the memory's words
    assert "p50_ratio" not in rows["full-"]
    assert rows["empty-"]["p50_ratio"] == round(
        rows["empty-"]["p50_ms"] / rows["full-"]["p50_ms"], 2
    )
    assert rows["empty-"]["p99_ratio"] == round(
        rows["empty-"]["p99_ms"] / rows["full-"]["p50_ms"], 2
    )
