"""Per-key rate limits, and the request limits every /v1 operation documents.

Rate limits. A token bucket per API key: it holds at most ``rate_limit_burst`` tokens and
refills at ``rate_limit_per_minute / 60`` tokens a second; each authenticated call (HTTP or
MCP) takes one. A call that finds the bucket empty is refused with 429 ``rate_limited`` and a
``Retry-After`` header (whole seconds until a token is back), and leaves an audit row of
action ``rate_limited``, outcome ``refused``. The check runs right after authentication, so
a refused call does no other work. ``rate_limit_per_minute = 0`` turns the limiter off.

The buckets live in the process: with several server processes each enforces the rate on
its own share of the traffic. A full bucket is the same as no bucket, so full buckets are
dropped when the table grows, which bounds its memory by the keys active in the last
``burst / rate`` seconds.

Request size. ``RequestGuard`` (service/app.py) refuses bodies over ``max_body_bytes`` with
413 before any work; fields have their own bounds in the schemas (422).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import Request

from service import metrics
from service.api.metrics import route_template
from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.errors import RateLimited

log = logging.getLogger("ctxpack.limits")

EXTRA = "rate_limiter"
"""The key of the limiter in ``AppState.extras``, where ``get_caller`` and /mcp look for it."""


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token buckets, one per key id.

    Args:
        per_minute: sustained calls a key may make per minute (> 0).
        burst: the bucket's size: calls a key may make at once after being idle.
        sessionmaker: where refused calls' audit rows are written.
        clock: monotonic seconds (tests pass a fake one).
        max_buckets: above this many buckets, full ones are dropped.
    """

    def __init__(
        self,
        per_minute: int,
        burst: int,
        sessionmaker: async_sessionmaker[AsyncSession] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = 10_000,
    ) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(max(burst, 1))
        self.sessionmaker = sessionmaker
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

    async def check(self, request: Request, caller: Caller) -> None:
        """Let the call through, or refuse it.

        Raises:
            RateLimited: the key's bucket is empty; ``retry_after`` is in whole seconds.
        """
        wait = self.take(caller.key_id)
        if wait <= 0:
            return
        retry_after = max(1, math.ceil(wait))
        metrics.RATE_LIMITED.inc()
        await self._audit(request, caller, retry_after)
        raise RateLimited(
            f"Rate limit exceeded: this key may make {self.per_minute} calls a minute; "
            f"retry in {retry_after} s",
            retry_after=retry_after,
        )

    async def _audit(self, request: Request, caller: Caller, retry_after: int) -> None:
        if self.sessionmaker is None:
            return
        ctx = AuditContext(action="rate_limited", caller=caller)
        started = request.scope.get("state", {}).get("started")
        if started is not None:
            ctx.started = started
        ctx.request = {"method": request.method, "route": route_template(request.scope)}
        try:
            async with self.sessionmaker() as session:
                await audit_service.record(
                    session,
                    ctx,
                    outcome="refused",
                    status_code=429,
                    details={"error_code": "rate_limited", "retry_after": retry_after},
                )
                await session.commit()
        except Exception:  # the refusal matters more than its audit row
            log.exception("audit_write_failed", extra={"action": ctx.action})


@contextlib.asynccontextmanager
async def run_rate_limiter(app: FastAPI, state: Any) -> AsyncIterator[None]:
    """Lifespan hook: put the limiter where ``get_caller`` and /mcp find it."""
    settings: Settings = state.settings
    if settings.rate_limit_per_minute > 0:
        state.extras[EXTRA] = RateLimiter(
            settings.rate_limit_per_minute, settings.rate_limit_burst, state.sessionmaker
        )
    try:
        yield
    finally:
        state.extras.pop(EXTRA, None)


_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def _document_limits(app: FastAPI) -> None:
    """Add the answers every /v1 operation may give to the OpenAPI schema: 429 (this
    module), 413 for operations with a body (RequestGuard)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        from service.schemas.common import ErrorBody, ErrorResponse

        components = schema.setdefault("components", {}).setdefault("schemas", {})
        ref = "#/components/schemas/{model}"
        components.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template=ref))
        components.setdefault("ErrorResponse", ErrorResponse.model_json_schema(ref_template=ref))
        for path, operations in schema.get("paths", {}).items():
            if not path.startswith("/v1/"):
                continue
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.setdefault(
                    "429",
                    {
                        "description": "Rate limited: the key exceeded its calls per minute "
                        "(see the Retry-After header)",
                        "content": {"application/json": {"schema": _ERROR_REF}},
                    },
                )
                if "requestBody" in operation:
                    responses.setdefault(
                        "413",
                        {
                            "description": "The request body is larger than max_body_bytes",
                            "content": {"application/json": {"schema": _ERROR_REF}},
                        },
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI, settings: Settings) -> None:
    """Register the limiter's lifespan hook and document the limits (from ``routers``)."""
    app.state.lifespan_hooks.append(run_rate_limiter)
    _document_limits(app)
