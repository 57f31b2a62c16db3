"""The console's one way into the domain: the call runner (``service/calls.py``), the same
flow as the HTTP API and MCP (authenticate -> rate limit -> unit of work -> audit on
success and on failure), so a console action does exactly what the key allows and leaves
the same audit row as the API call. The console only translates: a session cookie into the
``Caller`` of its key, and the runner's errors into pages.

Every page handler calls ``ConsoleCalls.call(operation, request)`` (the operation's declared
domain call), ``ConsoleCalls.run(operation, fn)`` (a page that does more in the same call),
or ``read`` for unaudited page views; nothing else in service/console opens a database
session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from service import operations
from service.calls import CallRunner, Transport
from service.console import security
from service.domain import audit as audit_service
from service.domain import console as console_service
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.domain.console import ConsoleSession
from service.errors import AuthenticationError, CtxpackError
from service.operations import Operation, Out, Req
from service.resources import Resources

T = TypeVar("T")
Work = Callable[[AsyncSession, AuditContext], Awaitable[T]]


def resources_of(request: Request) -> Resources:
    resources: Resources = request.app.state.ctx
    return resources


class ConsoleCalls:
    """The calls a signed-in console page makes, as its session's key."""

    def __init__(self, request: Request, console: ConsoleSession) -> None:
        self.request = request
        self.state: Resources = resources_of(request)
        self.console = console

    @property
    def caller(self) -> Caller:
        return self.console.caller

    @property
    def runner(self) -> CallRunner:
        return self.state.runner

    async def _admit(self) -> None:
        """The key's rate limit, as for a Bearer call (the runner skips it for a caller
        that is already resolved, so the console takes its token here)."""
        await self.runner.admit(
            self.caller,
            request={"method": self.request.method, "path": self.request.url.path},
            transport=Transport.CONSOLE,
        )

    async def run(self, operation: Operation[Any, Any], fn: Work[T]) -> T:
        """Run ``fn(session, ctx)`` as one audited call of ``operation`` (its audit action and
        pool are the operation table's, service/operations.py): the key's rate
        limit first, then the runner's unit of work; ``fn``'s domain function writes the
        success row in the call's transaction, and the runner writes the failure row."""
        self.request.state.console_call = True  # its failure row is the runner's
        await self._admit()

        async def work(session: AsyncSession, caller: Caller, ctx: AuditContext) -> T:
            return await fn(session, ctx)

        return await self.runner.run(
            self.caller,
            operation.action,
            work,
            pool="pack" if operation.pool == "pack" else "write",
            # A person who just edited a memory sees it: the console never reads a replica.
            primary=True,
            transport=Transport.CONSOLE,
            read_only=operation.read_only,
        )

    async def call(self, operation: Operation[Req, Out], request: Req) -> Out:
        """One call of ``operation`` answered by its declared domain call
        (``Operation.answer``), as ``run`` runs it."""
        return await self.run(
            operation, lambda s, ctx: operation.answer(self.state, s, self.caller, ctx, request)
        )

    async def refuse(self, action: AuditAction, error: CtxpackError) -> None:
        """Audit a call the page refused before running it (invalid form input)."""
        await self.runner.refuse(self.caller, action, error, transport=Transport.CONSOLE)

    async def read(self, fn: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """An unaudited read (like GET /v1/audit: page views of aggregates and the trail
        are not calls an agent made, and would flood the trail), rate-limited all the same."""
        await self._admit()
        async with self.runner.unit_of_work() as session:
            return await fn(session)


async def sign_in(request: Request, key: str) -> tuple[str, ConsoleSession] | None:
    """Exchange an API key for a console session: the key is authenticated exactly as a
    Bearer key is (the runner), and the session is audited as action ``console_login``.
    Returns the cookie's token and the session, or None for an unknown or revoked key."""
    runner = resources_of(request).runner
    try:
        caller = await runner.authenticate(key.strip())
    except AuthenticationError:
        return None
    calls = ConsoleCalls(request, ConsoleSession(caller=caller, csrf_token="", session_id=None))

    async def work(session: AsyncSession, ctx: AuditContext) -> tuple[str, ConsoleSession]:
        token, console = await console_service.start_session(session, caller)
        ctx.request = {"session_id": str(console.session_id)}
        await audit_service.record(session, ctx, outcome="ok", status_code=200)
        return token, console

    return await calls.run(operations.CONSOLE_LOGIN, work)


async def admit_sign_in(request: Request) -> float:
    """0 when this client may try a key now, else the seconds until it may (per client
    address, shared by every process: domain/console.py)."""
    state = resources_of(request)
    address = security.client_address(request, state.settings.trusted_proxies)
    return await console_service.admit_sign_in(state.sign_in_limiter, address)


async def refused_sign_in(request: Request, *, status_code: int, outcome: str) -> None:
    """Audit a sign-in that failed or was throttled (the address, never the key)."""
    state = resources_of(request)
    address = security.client_address(request, state.settings.trusted_proxies)
    async with state.runner.unit_of_work() as session:
        await console_service.record_refused_sign_in(
            session, address, status_code=status_code, outcome=outcome
        )


async def resume(request: Request, token: str) -> ConsoleSession | None:
    """The live session behind a cookie (None: signed out, expired or key revoked)."""
    async with resources_of(request).runner.unit_of_work() as session:
        return await console_service.resume_session(session, token)


async def sign_out(request: Request, console: ConsoleSession, token: str) -> None:
    """End the session (audited as ``console_logout``)."""

    async def work(session: AsyncSession, ctx: AuditContext) -> None:
        await console_service.end_session(session, token)
        ctx.request = {"session_id": str(console.session_id)}
        await audit_service.record(session, ctx, outcome="ok", status_code=200)

    await ConsoleCalls(request, console).run(operations.CONSOLE_LOGOUT, work)
