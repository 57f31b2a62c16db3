"""store/console.py: the console's SQL. A session is found by its token's hash only while it
has not expired and its key is active (the lookup joins the key, so revoking it ends the
session at once); sessions end one by one, per key, or when expired. The console's aggregates
leave out expired memories and what lies beyond the key's limits."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from service.store.console import ConsoleReadRepository, ConsoleSessionRepository
from tests.conftest import Key, KeyFactory, Seeder


@pytest.fixture
async def repo(app: FastAPI) -> AsyncIterator[ConsoleSessionRepository]:
    async with app.state.ctx.sessionmaker() as session:
        yield ConsoleSessionRepository(session)
        await session.rollback()


async def opened(repo: ConsoleSessionRepository, key: Key, hours: float = 1) -> str:
    token_hash = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    await repo.create(
        org_id=key.org_id, key_id=key.key_id, token_hash=token_hash, csrf_token="c",
        expires_at=datetime.now(UTC) + timedelta(hours=hours),
    )  # fmt: skip
    return token_hash


async def test_a_session_is_live_while_unexpired_and_its_key_active(
    repo: ConsoleSessionRepository, key: Key
) -> None:
    live = await opened(repo, key)
    expired = await opened(repo, key, hours=-1)
    found = await repo.active(live)
    assert found is not None and found[1].id == key.key_id
    assert await repo.active(expired) is None
    await repo.session.execute(
        text("UPDATE api_keys SET revoked_at = now() WHERE id = :k"), {"k": key.key_id}
    )
    assert await repo.active(live) is None


async def test_sessions_end_one_by_one_per_key_or_when_expired(
    repo: ConsoleSessionRepository, key: Key, make_key: KeyFactory
) -> None:
    other = await make_key(org=key.org)
    one, two = await opened(repo, key), await opened(repo, key)
    theirs = await opened(repo, other)
    expired = await opened(repo, other, hours=-1)
    await repo.end(one)
    assert await repo.active(one) is None and await repo.active(two) is not None
    await repo.end_for_key(key.org_id, key.key_id)
    assert await repo.active(two) is None and await repo.active(theirs) is not None
    await repo.prune_expired()
    remaining = await repo.session.execute(
        text("SELECT token_hash FROM console_sessions WHERE key_id = :k"), {"k": other.key_id}
    )
    assert [r[0] for r in remaining] == [theirs] and expired != theirs


async def test_names_leave_out_expired_memories_and_those_beyond_the_limits(
    app: FastAPI, key: Key, seed: Seeder
) -> None:
    mine = await seed.add("Alice's deploy notes.", namespace="alice")
    billing = await seed.add("Billing's runbook.", namespace="alice", project="billing")
    gone = await seed.add("An old rota.", namespace="alice")
    async with app.state.ctx.sessionmaker() as session:
        await session.execute(
            text("UPDATE memories SET expires_at = now() - interval '1 minute' WHERE id = :i"),
            {"i": gone},
        )
        repo = ConsoleReadRepository(session)
        ids = [mine, billing, gone]
        assert set(await repo.names(key.org_id, ids, [], [])) == {mine, billing}
        assert set(await repo.names(key.org_id, ids, [], ["search"])) == {mine}
        assert await repo.names(key.org_id, ids, ["bob"], []) == {}
        assert await repo.org_name(key.org_id) == key.org
        await session.rollback()
