"""Per-key rate limits: a token bucket per API key.

A bucket holds at most ``rate_limit_burst`` tokens and refills at ``rate_limit_per_minute /
60`` tokens a second; each authenticated call (HTTP, MCP over HTTP or stdio) takes one. A
call that finds the bucket empty is refused with 429 ``rate_limited`` and a ``Retry-After``
(whole seconds until a token is back), and leaves an audit row of action ``rate_limited``,
outcome ``refused`` (both written by the call runner, ``service.calls``). The check runs
right after authentication, so a refused call does no other work.
``rate_limit_per_minute = 0`` turns the limiter off.

The buckets live in the process: with several server processes each enforces the rate on
its own share of the traffic. A full bucket is the same as no bucket, so full buckets are
dropped when the table grows, which bounds its memory by the keys active in the last
``burst / rate`` seconds.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass


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

    def _drop_full(self, now: float) -> None:
        full = [
            k
            for k, b in self._buckets.items()
            if b.tokens + (now - b.stamp) * self.rate >= self.capacity
        ]
        for k in full:
            del self._buckets[k]
