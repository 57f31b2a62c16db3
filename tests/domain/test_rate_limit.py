"""domain/rate_limit.py: a token bucket per key, in memory (``RateLimiter``) or one row per
key in the database shared by every server process (``SharedRateLimiter``); a refusal takes
nothing, an idle bucket refills to its burst and never beyond. (The HTTP answer, a 429 with
Retry-After and an audit row, is tests/e2e/hardening/test_limits.py.)"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from service.config import Settings
from service.domain.rate_limit import RateLimiter, SharedRateLimiter
from service.store.database import create_engine


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_allows_burst_then_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(per_minute=60, burst=3, clock=clock)
    key = uuid.uuid4()
    assert [limiter.take(key) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take(key) == pytest.approx(1.0)  # one token a second
    clock.now += 0.5
    assert limiter.take(key) == pytest.approx(0.5)  # a refusal takes nothing
    clock.now += 0.5
    assert limiter.take(key) == 0.0
    assert limiter.take(key) > 0
    clock.now += 3600  # idle: back to a full burst, never more
    assert [limiter.take(key) for _ in range(4)][-1] > 0
    assert limiter.take(uuid.uuid4()) == 0.0  # keys do not share a bucket


def test_full_buckets_are_dropped_when_the_table_is_full() -> None:
    clock = FakeClock()
    limiter = RateLimiter(per_minute=60, burst=2, clock=clock, max_buckets=10)
    busy = uuid.uuid4()
    limiter.take(busy)
    limiter.take(busy)
    for _ in range(9):
        limiter.take(uuid.uuid4())
    clock.now += 5  # every bucket has refilled
    limiter.take(uuid.uuid4())
    assert len(limiter._buckets) <= 2
    limiter.take(busy)  # a dropped bucket comes back full: nothing was lost
    assert limiter.take(busy) == 0.0


async def test_shared_buckets_are_one_bucket_for_every_process(
    pg_url: str, settings: Settings
) -> None:
    """Two limiters on two engines (two server processes) draw from one row per key."""
    engines = [create_engine(pg_url, settings, generic_plans=True) for _ in range(2)]
    try:
        first, second = (SharedRateLimiter(e, per_minute=60, burst=4) for e in engines)
        org, key = uuid.uuid4(), uuid.uuid4()
        waits = [await (first, second)[i % 2].acquire(org, key) for i in range(4)]
        assert waits == [0.0] * 4
        wait = await second.acquire(org, key)
        assert 0 < wait <= 1.0  # one token a second
        assert await first.acquire(org, key) > 0  # a refusal takes nothing, on either side
        await asyncio.sleep(1.05)
        assert await first.acquire(org, key) == 0.0  # refilled for the time that passed
        assert await second.acquire(uuid.uuid4(), uuid.uuid4()) == 0.0  # keys do not share
        # Concurrent takes never grant more than the bucket holds (one token a minute:
        # nothing refills during the test).
        slow = [SharedRateLimiter(e, per_minute=1, burst=4) for e in engines]
        other = uuid.uuid4()
        granted = await asyncio.gather(*(slow[i % 2].acquire(org, other) for i in range(12)))
        assert sum(1 for w in granted if w == 0.0) == 4
    finally:
        for engine in engines:
            await engine.dispose()
