"""The call runner: how every call runs, whatever face it came through.

HTTP (``service/api``), MCP over HTTP and over stdio (``service/mcp``) and the CLI run their
calls through this module, and only translate their own request and response shapes. A call
is, in this order:

1. **authenticate**: a bearer token (``parse_bearer`` reads the ``Authorization`` header,
   once, for every HTTP face) becomes a ``Caller``, from the caller cache when it can answer
   (``domain/caller_cache.py``), else from the database. An unknown or revoked key is a 401
   ``AuthenticationError``. A face that already holds a caller (MCP over HTTP, whose
   endpoint authenticated the HTTP request; a console whose session cookie maps to a key)
   passes the ``Caller`` instead of a token, and steps 1-2 are skipped;
2. **rate limit** (``admit``): one token from the key's bucket (``domain/rate_limit.py``;
   by default a row in the database shared by every server process);
   an empty bucket is a 429 ``RateLimited`` with ``retry_after``, and an audit row of action
   ``rate_limited``, outcome ``refused``;
3. **unit of work** (``unit_of_work``): one session, committed when the domain function
   returns, rolled back when it raises. Domain functions ``flush()``, never ``commit()``.
   ``pool="pack"`` runs on the context packs' pool; ``pool="read"`` is a read-only call
   (a memory list) on the write pool. With a streaming replica (``read_database_url``)
   both read there instead, and write their audit row on the primary; ``primary=True``
   (the ``X-Ctxpack-Consistency: primary`` header) keeps such a read on the primary;
4. **audit**: the domain function writes the call's row inside the unit of work, so an
   acknowledged write is always audited (with ``read_audit = queued``, a read call's row
   waits on the unit of work and goes to the read-audit queue when it commits:
   ``domain/audit/read_queue.py``; ``run(read_only=...)`` and ``api/deps.py:audited`` mark
   such calls from the operation table); when the call fails, ``record_failure`` writes the
   row in a fresh transaction (the call's own work was rolled back): outcome ``rejected``
   (422), ``refused`` (other 4xx) or ``error`` (5xx), ``details.error_code``, the gate's
   reason codes, the field at fault, and ``details.transport`` for calls that did not come
   over the HTTP API. An audit write that fails is logged, never raised over the failure
   it reports.

API:

- ``CallRunner(resources)`` (or ``resources.runner``), built once per process;
- ``await runner.run(credential, action, fn, pool=..., transport=...)``: the whole call;
  ``credential`` is a bearer token (``str``) or an already-resolved ``Caller``; ``fn`` is
  ``async (session, caller, ctx) -> T`` and calls one domain function;
- ``await runner.refuse(credential, action, error, transport=...)``: audit a call refused
  before it reached the domain (invalid tool arguments);
- the steps one by one, for a face whose framework splits them (FastAPI dependencies and
  exception handlers): ``authenticate``, ``admit``, ``unit_of_work``, ``record_failure``;
- ``runner.operator_session()``: a unit of work for operator commands (``ctxpack keys``,
  ``ctxpack audit``), which act for no key and are not audited.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service import metrics
from service.domain import audit as audit_service
from service.domain import auth
from service.domain import keys as key_service
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.errors import AuthenticationError, CtxpackError, GateRejected, RateLimited

if TYPE_CHECKING:
    from service.resources import Resources

log = logging.getLogger("ctxpack.calls")

T = TypeVar("T")
Pool = Literal["write", "pack", "read"]
# The header that sends a read to the primary (read-your-writes) when a replica is set.
CONSISTENCY_HEADER = "x-ctxpack-consistency"
CallFn = Callable[[AsyncSession, Caller, AuditContext], Awaitable[T]]
MAX_TOKEN_CHARS = 200


class Transport(StrEnum):
    """The face a call came through (recorded in failure rows as ``details.transport``,
    except for HTTP, the default face)."""

    HTTP = "http"
    MCP = "mcp"
    CLI = "cli"
    CONSOLE = "console"


def parse_bearer(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header.

    Raises:
        AuthenticationError: no header, another scheme, or an empty token.
    """
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("Missing API key: send Authorization: Bearer <key>")
    return token.strip()


def outcome_of(status: int) -> str:
    """The audit outcome of a failed call's status."""
    return "rejected" if status == 422 else "error" if status >= 500 else "refused"


def failure_of(exc: BaseException | None) -> tuple[int, str, dict[str, Any]]:
    """``(status, error code, details)`` of a failed call: a ``CtxpackError`` knows its own;
    anything else is a 500 ``internal_error``."""
    if not isinstance(exc, CtxpackError):
        return 500, "internal_error", {}
    details: dict[str, Any] = {}
    if isinstance(exc, GateRejected):
        details["reasons"] = [r["code"] for r in exc.reasons]
    if "field" in exc.details:
        details["field"] = exc.details["field"]
    return exc.status_code, exc.code, details


class CallRunner:
    """Runs calls on one process's resources. See the module docstring."""

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    # --- 1. authenticate -------------------------------------------------------------------

    async def authenticate(self, token: str) -> Caller:
        """The caller behind ``token``, from the caller cache when it can answer.

        Raises:
            AuthenticationError: the key is malformed, unknown or revoked.
        """
        caller: Caller | None = None
        if token.startswith(auth.KEY_PREFIX) and len(token) <= MAX_TOKEN_CHARS:
            cache = self.resources.callers
            key_hash = auth.hash_key(token)
            caller = cache.get(key_hash)
            if caller is None:
                generation = cache.generation
                async with self.resources.sessionmaker() as session:
                    caller = await key_service.authenticate(session, token)
                if caller is not None:
                    cache.put(key_hash, caller, generation)
        if caller is None:
            raise AuthenticationError("Invalid or revoked API key")
        return caller

    # --- 2. rate limit ---------------------------------------------------------------------

    async def admit(
        self,
        caller: Caller,
        *,
        request: dict[str, Any] | None = None,
        started: float | None = None,
        transport: Transport = Transport.HTTP,
    ) -> None:
        """Take one token of the caller's rate limit, or refuse the call.

        Args:
            request: what the refusal's audit row keeps of the request (method and route
                template over HTTP; the tool over MCP stdio).
            started: when the call started (``time.perf_counter()``), for its latency.
            transport: the face the call came through, recorded in the refusal's row.

        Raises:
            RateLimited: the key's bucket is empty (429, ``retry_after`` in whole seconds).
        """
        limiter = self.resources.limiter
        if limiter is None:
            return
        wait = await limiter.acquire(caller.org_id, caller.key_id)
        if wait <= 0:
            return
        retry_after = max(1, math.ceil(wait))
        metrics.RATE_LIMITED.inc()
        ctx = AuditContext(action=AuditAction.RATE_LIMITED, caller=caller)
        if started is not None:
            ctx.started = started
        ctx.request = dict(request or {})
        await self.record_failure(
            ctx, 429, "rate_limited", {"retry_after": retry_after}, transport=transport
        )
        raise RateLimited(
            f"Rate limit exceeded: this key may make {limiter.per_minute} calls a minute; "
            f"retry in {retry_after} s",
            retry_after=retry_after,
        )

    async def caller_for(
        self,
        credential: Caller | str,
        *,
        request: dict[str, Any] | None = None,
        started: float | None = None,
        transport: Transport = Transport.HTTP,
    ) -> Caller:
        """Steps 1-2 for a token; an already-resolved ``Caller`` is returned as it is."""
        if isinstance(credential, Caller):
            return credential
        caller = await self.authenticate(credential)
        await self.admit(caller, request=request, started=started, transport=transport)
        return caller

    # --- 3. unit of work -------------------------------------------------------------------

    def _sessionmaker(self, pool: Pool, primary: bool) -> async_sessionmaker[AsyncSession]:
        res = self.resources
        if pool == "pack":
            replica = None if primary else res.read_pack_sessionmaker
            return replica or res.pack_sessionmaker
        if pool == "read":
            return (None if primary else res.read_sessionmaker) or res.sessionmaker
        return res.sessionmaker

    @contextlib.asynccontextmanager
    async def unit_of_work(
        self, pool: Pool = "write", *, primary: bool = False
    ) -> AsyncIterator[AsyncSession]:
        """One session: commit on success, roll back on any error. ``primary``: a read
        pool's call reads the primary even when a replica is configured.

        With a read-audit queue, the rows read calls deferred in the session are queued
        once it commits, and dropped when it rolls back (``domain/audit/read_queue.py``)."""
        queue = self.resources.read_audit
        async with self._sessionmaker(pool, primary)() as session:
            deferred = audit_service.attach(session, queue) if queue is not None else None
            try:
                yield session
                await session.commit()
            except BaseException:
                if deferred is not None:
                    deferred.discard()
                await session.rollback()
                raise
            if deferred is not None:
                deferred.commit()

    def operator_session(self) -> contextlib.AbstractAsyncContextManager[AsyncSession]:
        """A unit of work for operator commands (no key, no audit row)."""
        return self.unit_of_work()

    # --- 4. audit on failure ---------------------------------------------------------------

    async def record_failure(
        self,
        ctx: AuditContext,
        status: int,
        code: str,
        details: dict[str, Any] | None = None,
        *,
        transport: Transport = Transport.HTTP,
    ) -> None:
        """The failed call's audit row, in a transaction of its own (no row for a call with
        no authenticated caller). Never raises: the failure matters more than its row."""
        if ctx.caller is None:
            return
        # A failed write stored nothing, so its row names no memory an erase could scrub: it
        # keeps no name (a derived one is the content's first sentence, maybe a stored one's).
        ctx.request.pop("name", None)
        row: dict[str, Any] = {"error_code": code, **(details or {})}
        if transport != Transport.HTTP:
            row["transport"] = str(transport)
        try:
            async with self.resources.sessionmaker() as session:
                await audit_service.record(
                    session,
                    ctx,
                    outcome=outcome_of(status),
                    status_code=status,
                    details=row,
                    rejection_count=1 if status == 422 else 0,
                    redaction_count=int(ctx.request.get("redaction_count", 0)),
                )
                await session.commit()
        except Exception:  # the failure being reported matters more than its audit row
            log.exception("audit_write_failed", extra={"action": str(ctx.action)})

    # --- the whole call --------------------------------------------------------------------

    async def run(
        self,
        credential: Caller | str,
        action: AuditAction,
        fn: CallFn[T],
        *,
        pool: Pool = "write",
        primary: bool = False,
        transport: Transport = Transport.MCP,
        request: dict[str, Any] | None = None,
        read_only: bool = False,
    ) -> T:
        """Run one call: authenticate, rate limit, unit of work, audit on failure.

        Args:
            credential: a bearer token, or an already-authenticated ``Caller``.
            action: the audit action (the same for a call over any face).
            fn: ``async (session, caller, ctx) -> T``: one domain function, which writes
                the success row itself.
            pool: ``pack`` for context packs, ``read`` for memory lists (both on the
                replica when one is configured).
            primary: read on the primary even when a replica is configured.
            transport: the face, recorded in failure rows.
            request: what a rate-limit refusal's row keeps of the request.
            read_only: the operation changes nothing stored but its audit row (the
                operation table's flag): its row may go to the read-audit queue.

        Raises:
            whatever the call raised, after its failure row is written.
        """
        caller = await self.caller_for(credential, request=request, transport=transport)
        ctx = AuditContext(action=action, caller=caller, read_only=read_only)
        try:
            async with self.unit_of_work(pool, primary=primary) as session:
                return await fn(session, caller, ctx)
        except Exception as exc:
            status, code, details = failure_of(exc)
            await self.record_failure(ctx, status, code, details, transport=transport)
            raise

    async def refuse(
        self,
        credential: Caller | str,
        action: AuditAction,
        error: CtxpackError,
        *,
        transport: Transport = Transport.MCP,
    ) -> None:
        """Audit a call refused before it reached the domain (invalid arguments)."""
        caller = await self.caller_for(credential, transport=transport)
        status, code, details = failure_of(error)
        ctx = AuditContext(action=action, caller=caller)
        await self.record_failure(ctx, status, code, details, transport=transport)
