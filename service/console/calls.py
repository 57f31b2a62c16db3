"""The console's one way into the domain: authenticate -> rate-limit -> unit of work ->
audit, the same flow as the HTTP API (service/api/deps.py and api/errors.py), so a console
action does exactly what the key allows and leaves the same audit row as the API call.

Every page handler calls ``ConsoleCalls.run(action, fn)``; nothing else in service/console
opens a database session. When the HTTP face moves to a shared call runner, this module is
the only one to switch over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from service.api.deps import AppState
from service.api.deps import _unit_of_work as unit_of_work
from service.api.errors import _audit_failure
from service.domain import caller_cache
from service.domain import console as console_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.console import ConsoleSession
from service.errors import CtxpackError, GateRejected

T = TypeVar("T")
Work = Callable[[AsyncSession, AuditContext], Awaitable[T]]


def _unit_of_work(state: AppState, pack: bool) -> AbstractAsyncContextManager[AsyncSession]:
    """The API's unit of work (commit on success, roll back on any error), on the pack pool
    for context packs as POST /v1/context."""
    return unit_of_work(state.pack_sessionmaker if pack else state.sessionmaker)


class ConsoleCalls:
    """The calls a signed-in console page makes, as its session's key."""

    def __init__(self, request: Request, console: ConsoleSession) -> None:
        self.request = request
        self.state: AppState = request.app.state.ctx
        self.console = console

    @property
    def caller(self) -> Caller:
        return self.console.caller

    async def run(self, action: str, fn: Work[T], *, pack: bool = False) -> T:
        """Run ``fn(session, ctx)`` as one audited call named ``action``.

        The key's rate limit applies first; ``fn``'s domain function writes the success row
        in the call's transaction; a failure rolls the work back and writes the failure row
        in a fresh one (as the API's error handler does), then propagates."""
        limiter = self.state.extras.get("rate_limiter")
        if limiter is not None:
            await limiter.check(self.request, self.caller)
        ctx = AuditContext(action=action, caller=self.caller)
        started = self.request.scope.get("state", {}).get("started")
        if started is not None:
            ctx.started = started
        self.request.state.audit = ctx
        try:
            async with _unit_of_work(self.state, pack) as session:
                return await fn(session, ctx)
        except CtxpackError as exc:
            details: dict[str, object] = {}
            if isinstance(exc, GateRejected):
                details["reasons"] = [r["code"] for r in exc.reasons]
            if "field" in exc.details:
                details["field"] = exc.details["field"]
            await _audit_failure(self.request, exc.status_code, exc.code, details)
            raise
        finally:
            self.request.state.audit = None

    async def read(self, fn: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """An unaudited read (like GET /v1/audit: page views of aggregates and the trail
        are not calls an agent made, and would flood the trail), rate-limited all the same."""
        limiter = self.state.extras.get("rate_limiter")
        if limiter is not None:
            await limiter.check(self.request, self.caller)
        async with _unit_of_work(self.state, False) as session:
            return await fn(session)


async def sign_in(request: Request, key: str) -> tuple[str, ConsoleSession] | None:
    """Exchange an API key for a console session: the key is authenticated exactly as a
    Bearer key is, and the session is audited as action ``console_login``. Returns the
    cookie's token and the session, or None for an unknown or revoked key."""
    state: AppState = request.app.state.ctx
    caller = await caller_cache.authenticate(
        state.extras.get("caller_cache"), state.sessionmaker, key.strip()
    )
    if caller is None:
        return None
    calls = ConsoleCalls(request, ConsoleSession(caller=caller, csrf_token="", session_id=None))

    async def work(session: AsyncSession, ctx: AuditContext) -> tuple[str, ConsoleSession]:
        from service.domain import audit as audit_service

        token, console = await console_service.start_session(session, caller)
        ctx.request = {"session_id": str(console.session_id)}
        await audit_service.record(session, ctx, outcome="ok", status_code=200)
        return token, console

    return await calls.run("console_login", work)


async def resume(request: Request, token: str) -> ConsoleSession | None:
    """The live session behind a cookie (None: signed out, expired or key revoked)."""
    state: AppState = request.app.state.ctx
    async with _unit_of_work(state, False) as session:
        return await console_service.resume_session(session, token)


async def sign_out(request: Request, console: ConsoleSession, token: str) -> None:
    """End the session (audited as ``console_logout``)."""

    async def work(session: AsyncSession, ctx: AuditContext) -> None:
        from service.domain import audit as audit_service

        await console_service.end_session(session, token)
        ctx.request = {"session_id": str(console.session_id)}
        await audit_service.record(session, ctx, outcome="ok", status_code=200)

    await ConsoleCalls(request, console).run("console_logout", work)
