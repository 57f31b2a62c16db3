"""What the domain tests share: a session of the app's store that commits at the end, and
the caller a key authenticates as."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import keys as key_service
from service.domain.auth import Caller
from tests.conftest import Key


@pytest.fixture
async def session(app: FastAPI) -> AsyncIterator[AsyncSession]:
    async with app.state.ctx.sessionmaker() as s:
        yield s
        await s.commit()


async def caller_of(session: AsyncSession, key: Key) -> Caller:
    caller = await key_service.authenticate(session, key.key)
    assert caller is not None
    return caller
