"""Dependencies shared by the routers: app state, the unit of work, the caller, the audit
context. Routers stay thin: validate, call one domain function, return a schema."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.domain import caller_cache
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder
from service.errors import AuthenticationError


@dataclass
class AppState:
    """Everything built once per process, in the lifespan."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: AsyncEmbedder
    database_url: str
    extras: dict[str, Any] = field(default_factory=dict)
    # Context packs' pool (generic plans; see database.create_engine). None: ``sessionmaker``.
    read_sessionmaker: async_sessionmaker[AsyncSession] | None = None

    @property
    def pack_sessionmaker(self) -> async_sessionmaker[AsyncSession]:
        return self.read_sessionmaker or self.sessionmaker


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.ctx
    return state


StateDep = Annotated[AppState, Depends(get_state)]


@contextlib.asynccontextmanager
async def _unit_of_work(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work per call: commit on success, roll back on any error."""
    async with sessionmaker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


async def get_session(state: StateDep) -> AsyncIterator[AsyncSession]:
    async with _unit_of_work(state.sessionmaker) as session:
        yield session


async def get_pack_session(state: StateDep) -> AsyncIterator[AsyncSession]:
    """A context pack's unit of work, on the pack pool."""
    async with _unit_of_work(state.pack_sessionmaker) as session:
        yield session


PackSessionDep = Annotated[AsyncSession, Depends(get_pack_session, scope="function")]


# scope="function": the commit happens before the response is sent, so a client is never
# told a write succeeded that then failed to commit (the default scope commits afterwards).
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("Missing API key: send Authorization: Bearer <key>")
    return token.strip()


async def get_caller(request: Request, state: StateDep) -> Caller:
    """The authenticated caller. 401 when the key is missing, unknown or revoked."""
    token = bearer_token(request)
    caller = await caller_cache.authenticate(
        state.extras.get("caller_cache"), state.sessionmaker, token
    )
    if caller is None:
        raise AuthenticationError("Invalid or revoked API key")
    request.state.caller = caller
    limiter = state.extras.get("rate_limiter")
    if limiter is not None:
        await limiter.check(request, caller)
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def get_embedder(state: StateDep) -> AsyncEmbedder:
    return state.embedder


EmbedderDep = Annotated[AsyncEmbedder, Depends(get_embedder)]


def audited(action: str) -> Callable[..., Coroutine[Any, Any, AuditContext]]:
    """A dependency that opens the call's audit context. On failure the error handler writes
    the row (the call's own transaction having rolled back)."""

    async def dependency(request: Request, caller: CallerDep) -> AuditContext:
        started = getattr(request.state, "started", None)
        ctx = AuditContext(action=action, caller=caller)
        if started is not None:
            ctx.started = started
        request.state.audit = ctx
        return ctx

    return dependency
