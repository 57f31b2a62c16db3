"""create_app(): the FastAPI application. Settings, engine, sessionmaker and embedder are built
once, in the lifespan, and shared by the HTTP routes and the MCP adapter."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api import health
from service.api.deps import AppState
from service.api.errors import error_response, install_error_handlers
from service.config import Settings
from service.domain.caller_cache import run_caller_cache
from service.embedding import AsyncEmbedder, Embedder, build_embedder
from service.errors import ServiceUnavailable
from service.store.database import create_engine, make_sessionmaker, resolve_database_url

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


async def _check_database(state: AppState) -> None:
    async with state.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute "
                    "WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
                )
            )
        ).first()
    if row is None:
        raise ServiceUnavailable("the database has no ctxpack schema: run `ctxpack db upgrade`")
    if int(row[0]) != state.embedder.dims:
        raise ServiceUnavailable(
            f"embedding column holds {row[0]} dims, embedder returns {state.embedder.dims}"
        )


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

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or await anyio.to_thread.run_sync(resolve_database_url, settings)
        engine = create_engine(url, settings)
        pack_engine = create_engine(url, settings, generic_plans=True)
        model = embedder or await anyio.to_thread.run_sync(build_embedder, settings)
        state = AppState(
            settings=settings,
            engine=engine,
            sessionmaker=make_sessionmaker(engine),
            embedder=AsyncEmbedder(model, settings.embed_concurrency, settings.query_cache_size),
            database_url=url,
            read_sessionmaker=make_sessionmaker(pack_engine),
        )
        await _check_database(state)
        app.state.ctx = state
        async with contextlib.AsyncExitStack() as stack:
            for hook in app.state.lifespan_hooks:
                await stack.enter_async_context(hook(app, state))
            log.info("ready", extra={"embedder": model.name, "embedded_db": settings.embedded})
            try:
                yield
            finally:
                await engine.dispose()
                await pack_engine.dispose()

    app = FastAPI(
        title="ctxpack",
        version="0.1.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # Self-hosted Swagger UI instead (service/api/docs.py): FastAPI's loads from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.lifespan_hooks = [run_caller_cache]
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(RequestGuard, max_body_bytes=settings.max_body_bytes)
    app.include_router(health.router)
    _include_feature_routers(app, settings)
    return app


def _include_feature_routers(app: FastAPI, settings: Settings) -> None:
    """Each feature registers its router here (and, if it needs one, a lifespan hook)."""
    from service.api import routers

    routers.install(app, settings)


def state_of(app: FastAPI) -> Any:
    return app.state.ctx
