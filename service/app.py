"""create_app(): the FastAPI application. The process's resources (``open_resources``:
engine, session makers, embedder, caller cache, limiter, write pipeline) are opened once, in
the lifespan, and shared by the HTTP routes and the MCP adapter at /mcp, which this factory
mounts side by side (neither transport imports the other)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api import health, metrics, routers
from service.api.errors import error_response, install_error_handlers
from service.api.json_guard import JsonGuard
from service.api.openapi import document_limits
from service.config import Settings
from service.console import mount as console
from service.domain import audit as audit_service
from service.domain import expiry as expiry_service
from service.domain import namespace_indexes as namespace_index_service
from service.embedding import Embedder
from service.mcp.http import PATH as MCP_PATH
from service.mcp.http import McpEndpoint
from service.resources import Resources, open_resources

log = logging.getLogger("ctxpack")

API_DESCRIPTION = """\
ctxpack remembers what agents should not have to relearn and compiles goal-shaped context packs.

Every `/v1` endpoint needs `Authorization: Bearer <key>`. Errors are JSON:
`{"error": {"code": "...", "message": "...", "field": "..."}}`.
"""


class RequestGuard:
    """Pure ASGI middleware: stamps the start time and refuses bodies over the size limit
    before any work is done (413), whether or not Content-Length is sent."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["started"] = time.perf_counter()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            {
                "code": "payload_too_large",
                "message": f"Request body exceeds {self.max_body_bytes} bytes",
                "field": "body",
            },
        )
        await response(scope, receive, send)


class _BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive``. An HTTPException, so that FastAPI's own body parsing passes
    it through (it turns any other exception into a 400) and it renders as 413."""

    def __init__(self, limit: int = 0) -> None:
        super().__init__(413, f"Request body exceeds {limit} bytes")


def create_app(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    database_url: str | None = None,
) -> FastAPI:
    """Build the app. Resources are created when the lifespan starts, not here.

    Args:
        settings: defaults to ``Settings()`` (the environment).
        embedder: an already-built embedder (tests pass a fake); else built from settings.
        database_url: an already-resolved database URL; else resolved from settings.
    """
    settings = settings or Settings()
    mcp_endpoint = McpEndpoint()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_resources(
            settings, database_url=database_url, embedder=embedder
        ) as resources:
            app.state.ctx = resources
            resources.text_workers.start()
            await _load_document_lane(resources)
            async with (
                _retention_job(app, resources),
                _expiry_job(app, resources),
                _namespace_index_job(app, resources),
                mcp_endpoint.serving(resources),
            ):
                log.info(
                    "ready",
                    extra={
                        "embedder": resources.embedder.sync.name,
                        "embedded_db": settings.embedded,
                    },
                )
                yield

    app = FastAPI(
        title="ctxpack",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # Self-hosted Swagger UI instead (service/api/docs.py): FastAPI's loads from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(RequestGuard, max_body_bytes=settings.max_body_bytes)
    app.include_router(health.router)
    routers.install(app, settings)
    # MCP (streamable HTTP) at /mcp, same Bearer keys: mounted here, beside the API, so
    # that neither transport imports the other.
    app.router.routes.append(Route(MCP_PATH, mcp_endpoint, include_in_schema=False))
    # The web console at /ui: a third face on the same call runner.
    console.install(app, settings)
    # Appended, so innermost: inside RequestGuard, which bounds the body JsonGuard buffers.
    app.user_middleware.append(Middleware(JsonGuard))
    document_limits(app)
    metrics.install(app, settings)
    return app


@contextlib.asynccontextmanager
async def _background(
    app: FastAPI, attr: str, name: str, job: Coroutine[Any, Any, None] | None
) -> AsyncIterator[None]:
    """Run ``job`` as a background task while the app is up (``app.state.<attr>``; None when
    the job is switched off), and cancel it at shutdown.

    Shutdown waits ``JOB_STOP_SECONDS`` at most for the job to stop: a job caught in a
    statement that does not end at its cancel (the index job's CREATE INDEX CONCURRENTLY
    waits for every older transaction) must not hold the process up; it is logged and left.
    ``asyncio.wait`` also lets a cancel of the shutdown itself through, which awaiting the
    task under ``suppress(CancelledError)`` swallowed."""
    setattr(app.state, attr, None)
    if job is None:
        yield
        return
    task = asyncio.create_task(job, name=name)
    setattr(app.state, attr, task)
    try:
        yield
    finally:
        setattr(app.state, attr, None)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=JOB_STOP_SECONDS)
        if not done:
            log.warning("background_job_not_stopped", extra={"job": name})
        elif not task.cancelled() and task.exception() is not None:
            log.error("background_job_failed", exc_info=task.exception(), extra={"job": name})


# How long shutdown waits for a cancelled background job (``_background``).
JOB_STOP_SECONDS = 10.0


def _retention_job(
    app: FastAPI, resources: Resources
) -> contextlib.AbstractAsyncContextManager[None]:
    """The audit retention job (``app.state.retention_task``; off when
    ``audit_prune_interval_seconds`` is 0)."""
    settings = resources.settings
    job = (
        audit_service.run_retention(
            resources.sessionmaker,
            interval_seconds=settings.audit_prune_interval_seconds,
            default_days=settings.audit_retention_days,
        )
        if settings.audit_prune_interval_seconds > 0
        else None
    )
    return _background(app, "retention_task", "audit-retention", job)


def _expiry_job(app: FastAPI, resources: Resources) -> contextlib.AbstractAsyncContextManager[None]:
    """The expiry job, which purges expired memories (``app.state.expiry_task``; off when
    ``expiry_purge_interval_seconds`` is 0)."""
    interval = resources.settings.expiry_purge_interval_seconds
    job = (
        expiry_service.run_expiry(resources.sessionmaker, interval_seconds=interval)
        if interval > 0
        else None
    )
    return _background(app, "expiry_task", "memory-expiry", job)


def _namespace_index_job(
    app: FastAPI, resources: Resources
) -> contextlib.AbstractAsyncContextManager[None]:
    """The namespace index job, which builds big namespaces' own indexes
    (``app.state.namespace_index_task``; off when ``namespace_index_interval_seconds`` is 0)."""
    settings = resources.settings
    job = (
        namespace_index_service.run_namespace_indexing(
            resources.engine,
            min_rows=settings.exact_scan_max_rows,
            max_indexed=settings.namespace_index_max,
            interval_seconds=settings.namespace_index_interval_seconds,
        )
        if settings.namespace_index_interval_seconds > 0
        else None
    )
    return _background(app, "namespace_index_task", "namespace-indexes", job)


async def _load_document_lane(resources: Resources) -> None:
    """Load the embedder's batch lane (bf16 on CPUs with native bf16: about 4 s, mostly
    importing torch) before the server is ready, not at its first batch. Loaded at the first
    batch, in the background, it embedded that batch and the next few in fp32 (less than half
    its pace: make bench measured batch writes at 0.28x the embedder's own); loaded in the
    background from start-up, it took both cores from the first context calls (p99 at c=1
    went from 24 to 89-166 ms in make bench). /readyz answers once it is loaded."""
    lane = getattr(resources.model, "document_lane", None)
    if lane is not None:
        await anyio.to_thread.run_sync(functools.partial(lane, wait=True))


def state_of(app: FastAPI) -> Resources:
    """The resources the app's lifespan opened."""
    resources: Resources = app.state.ctx
    return resources
