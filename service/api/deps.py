"""Dependencies shared by the routers: the resources, the unit of work, the caller, the
audit context. Routers stay thin: validate, call one domain function, return a schema.

Each dependency translates HTTP into one step of the call runner (``service.calls``), which
is where the steps are written: ``get_caller`` is authenticate + rate limit, ``SessionDep``
the unit of work; on failure the error handler (``api/errors.py``) has the runner write the
failure row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from service.api.metrics import route_template
from service.calls import CONSISTENCY_HEADER, CallRunner, parse_bearer
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder
from service.operations import Operation
from service.resources import Resources


def get_state(request: Request) -> Resources:
    resources: Resources = request.app.state.ctx
    return resources


StateDep = Annotated[Resources, Depends(get_state)]


def get_runner(state: StateDep) -> CallRunner:
    return state.runner


RunnerDep = Annotated[CallRunner, Depends(get_runner)]


async def get_session(runner: RunnerDep) -> AsyncIterator[AsyncSession]:
    async with runner.unit_of_work() as session:
        yield session


def wants_primary(request: Request) -> bool:
    """``X-Ctxpack-Consistency: primary``: read on the primary, not on the replica (a caller
    reading its own write). Any other value, or none, lets the read go to the replica."""
    return request.headers.get(CONSISTENCY_HEADER, "").strip().lower() == "primary"


async def get_pack_session(request: Request, runner: RunnerDep) -> AsyncIterator[AsyncSession]:
    """A context pack's unit of work, on the pack pool (or the replica's)."""
    async with runner.unit_of_work("pack", primary=wants_primary(request)) as session:
        yield session


async def get_read_session(request: Request, runner: RunnerDep) -> AsyncIterator[AsyncSession]:
    """A read-only call's unit of work (a memory list): on the replica when one is set."""
    async with runner.unit_of_work("read", primary=wants_primary(request)) as session:
        yield session


# scope="function": the commit happens before the response is sent, so a client is never
# told a write succeeded that then failed to commit (the default scope commits afterwards).
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
PackSessionDep = Annotated[AsyncSession, Depends(get_pack_session, scope="function")]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]


def bearer_token(request: Request) -> str:
    return parse_bearer(request.headers.get("authorization"))


async def get_caller(request: Request, runner: RunnerDep) -> Caller:
    """The authenticated caller. 401 when the key is missing, unknown or revoked; 429 when
    its rate limit is spent."""
    caller = await runner.authenticate(bearer_token(request))
    request.state.caller = caller
    await runner.admit(
        caller,
        request={"method": request.method, "route": route_template(request.scope)},
        started=getattr(request.state, "started", None),
    )
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def get_embedder(state: StateDep) -> AsyncEmbedder:
    return state.embedder


EmbedderDep = Annotated[AsyncEmbedder, Depends(get_embedder)]


def audited(operation: Operation[Any, Any]) -> Callable[..., Coroutine[Any, Any, AuditContext]]:
    """A dependency that opens the audit context of a call of ``operation`` (its action and
    read-only flag are the operation table's). On failure the error handler has the call
    runner write the row (the call's own transaction having rolled back)."""

    async def dependency(request: Request, caller: CallerDep) -> AuditContext:
        started = getattr(request.state, "started", None)
        ctx = AuditContext(action=operation.action, caller=caller, read_only=operation.read_only)
        if started is not None:
            ctx.started = started
        request.state.audit = ctx
        return ctx

    return dependency
