"""store/rate_limits.py: ``take_token``, a key's bucket as one row taken from in one
statement: created full, a grant takes one token, a refusal takes nothing, a key's bucket is
its own. (The limiter that turns it into a wait: tests/domain/test_rate_limit.py.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.store.database import create_engine
from service.store.rate_limits import take_token


@pytest.fixture
async def engine(pg_url: str, settings: Settings) -> AsyncIterator[AsyncEngine]:
    """An autocommit engine, as the pack pool the limiter runs on."""
    engine = create_engine(pg_url, settings, generic_plans=True)
    yield engine
    await engine.dispose()


async def test_a_bucket_is_created_full_and_each_grant_takes_one_token(
    engine: AsyncEngine,
) -> None:
    org, key = uuid.uuid4(), uuid.uuid4()
    # rate 0: nothing refills, so the counts are exact whatever the clock does
    taken = [await take_token(engine, org, key, capacity=3, rate=0) for _ in range(3)]
    assert taken == [(True, 2.0), (True, 1.0), (True, 0.0)]


async def test_a_refusal_takes_nothing_and_other_keys_keep_their_own_bucket(
    engine: AsyncEngine,
) -> None:
    org, key = uuid.uuid4(), uuid.uuid4()
    await take_token(engine, org, key, capacity=1, rate=0)
    assert await take_token(engine, org, key, capacity=1, rate=0) == (False, 0.0)
    assert await take_token(engine, org, key, capacity=1, rate=0) == (False, 0.0)
    assert await take_token(engine, org, uuid.uuid4(), capacity=1, rate=0) == (True, 0.0)
    assert await take_token(engine, uuid.uuid4(), key, capacity=1, rate=0) == (True, 0.0)


async def test_a_bucket_refills_with_time_up_to_its_capacity(engine: AsyncEngine) -> None:
    org, key = uuid.uuid4(), uuid.uuid4()
    for _ in range(2):
        await take_token(engine, org, key, capacity=2, rate=0)
    # a huge rate: any time at all since the last take refills the bucket, never beyond 2
    granted, left = await take_token(engine, org, key, capacity=2, rate=1e12)
    assert granted and left == 1.0
