"""The shared rate limit's SQL: a key's token bucket as one row, taken from in one statement.

``take_token`` refills the bucket for the time since its last call, takes a token when one is
there, and answers whether it did, in a single ``INSERT ... ON CONFLICT DO UPDATE``: the row
lock serialises the calls of one key across every server process, and a call costs one round
trip on an autocommit connection. ``now()`` is the statement's start (each statement is its
own transaction there); a stamp never moves backwards, so two processes whose statements
start out of order never refill a bucket twice for the same time.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

# The refill reads the time from the inserted row (EXCLUDED.stamp, the statement's now()):
# Citus takes only immutable functions in DO UPDATE SET, and evaluates now() in VALUES.
_REFILLED = (
    "least(CAST(:capacity AS float8), b.tokens + CAST(:rate AS float8) * "
    "greatest(0, extract(epoch FROM excluded.stamp - b.stamp)))"
)

_TAKE = text(
    f"""
    INSERT INTO rate_limit_buckets AS b (org_id, key_id, tokens, stamp, granted)
    VALUES (:org_id, :key_id, CAST(:capacity AS float8) - 1, now(), true)
    ON CONFLICT (org_id, key_id) DO UPDATE SET
        tokens = {_REFILLED} - CASE WHEN {_REFILLED} >= 1 THEN 1 ELSE 0 END,
        stamp = greatest(b.stamp, excluded.stamp),
        granted = {_REFILLED} >= 1
    RETURNING granted, tokens
    """
)


async def take_token(
    engine: AsyncEngine,
    org_id: uuid.UUID,
    key_id: uuid.UUID,
    *,
    capacity: float,
    rate: float,
) -> tuple[bool, float]:
    """Take one token from ``key_id``'s bucket (created full). Returns ``(granted, tokens
    left)``; a refused call takes nothing. ``engine`` must autocommit (the pack pool)."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                _TAKE,
                {"org_id": org_id, "key_id": key_id, "capacity": capacity, "rate": rate},
            )
        ).one()
    return bool(row.granted), float(row.tokens)
