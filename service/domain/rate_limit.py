"""Per-key rate limits: a token bucket per API key.

A bucket holds at most ``rate_limit_burst`` tokens and refills at ``rate_limit_per_minute /
60`` tokens a second; each authenticated call (HTTP, MCP over HTTP or stdio) takes one. A
call that finds the bucket empty is refused with 429 ``rate_limited`` and a ``Retry-After``
(whole seconds until a token is back), and leaves an audit row of action ``rate_limited``,
outcome ``refused`` (both written by the call runner, ``service.calls``). The check runs
right after authentication, so a refused call does no other work.
``rate_limit_per_minute = 0`` turns the limiter off.

Where the buckets live (``rate_limit_backend``):

- ``postgres`` (``SharedRateLimiter``, the default): one row per key in the database, taken
  from by one statement per call (``store/rate_limits.py``), so every ``serve`` process on
  the database draws from the same bucket and N processes together allow what one allows;
- ``memory`` (``RateLimiter``): in the process, no round trip; with several server processes
  each enforces the rate on its own share of the traffic. A full bucket is the same as no
  bucket, so full buckets are dropped when the table grows, which bounds its memory by the
  keys active in the last ``burst / rate`` seconds.

Both answer ``await limiter.acquire(org_id, key_id)``: 0 when the call may go ahead, else the
seconds until a token is back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from service.store.rate_limits import take_token


class Limiter(Protocol):
    """What the call runner asks of a rate limiter."""

    per_minute: int

    async def acquire(self, org_id: uuid.UUID, key_id: uuid.UUID) -> float:
        """0 when the call may go ahead, else the seconds until a token is back."""
        ...


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token buckets, one per key id.

    Args:
        per_minute: sustained calls a key may make per minute (> 0).
        burst: the bucket's size: calls a key may make at once after being idle.
        clock: monotonic seconds (tests pass a fake one).
        max_buckets: above this many buckets, full ones are dropped.
    """

    def __init__(
        self,
        per_minute: int,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = 10_000,
    ) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(max(burst, 1))
        self.clock = clock
        self.max_buckets = max_buckets
        self._buckets: dict[uuid.UUID, _Bucket] = {}

    def take(self, key_id: uuid.UUID) -> float:
        """Take a token for ``key_id``. Returns 0 when the call may go ahead, else the
        seconds until a token is back (nothing is taken then)."""
        now = self.clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            if len(self._buckets) >= self.max_buckets:
                self._drop_full(now)
            bucket = self._buckets[key_id] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    async def acquire(self, org_id: uuid.UUID, key_id: uuid.UUID) -> float:
        """``take`` for the call runner (see ``Limiter``)."""
        return self.take(key_id)

    def _drop_full(self, now: float) -> None:
        full = [
            k
            for k, b in self._buckets.items()
            if b.tokens + (now - b.stamp) * self.rate >= self.capacity
        ]
        for k in full:
            del self._buckets[k]


class SharedRateLimiter:
    """Token buckets in the database, one row per key, shared by every server process.

    Args:
        engine: an autocommit engine on the primary (the pack pool): one round trip a call.
        per_minute: sustained calls a key may make per minute (> 0).
        burst: the bucket's size.
    """

    def __init__(self, engine: AsyncEngine, per_minute: int, burst: int) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.engine = engine
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(max(burst, 1))

    async def acquire(self, org_id: uuid.UUID, key_id: uuid.UUID) -> float:
        granted, tokens = await take_token(
            self.engine, org_id, key_id, capacity=self.capacity, rate=self.rate
        )
        return 0.0 if granted else max(1.0 - tokens, 0.0) / self.rate
