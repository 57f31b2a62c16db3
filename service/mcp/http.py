"""MCP over streamable HTTP at ``/mcp``, in the same app and with the same Bearer keys.

Every HTTP request to /mcp is authenticated before the MCP layer sees a byte of it: no key or
a bad key is a 401 JSON error (``{"error": {"code": "unauthorized", ...}}``, the API's shape),
never an MCP session. The caller is then left in the ASGI scope, where the tools find it; the
key's scopes, projects and namespaces apply to every tool as to every endpoint.

The MCP server and its session manager are built once, when the app's lifespan starts (a
lifespan hook), on the resources the lifespan built; the transport is stateless (each POST is
answered on its own, as JSON), so any worker can serve any request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from service.config import Settings
from service.domain import caller_cache
from service.domain.auth import Caller
from service.errors import AuthenticationError, CtxpackError, ServiceUnavailable
from service.mcp.backends import CALLER_SCOPE_KEY, LocalBackend, caller_from_request
from service.mcp.server import build_server

PATH = "/mcp"
_EXTRA = "mcp_session_manager"


def _error(exc: CtxpackError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    if exc.status_code == 429 and "retry_after" in exc.details:
        headers = {"Retry-After": str(exc.details["retry_after"])}
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code, headers=headers)


def _bearer(scope: Scope) -> str:
    header = ""
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            header = value.decode("latin-1")
            break
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError("Missing API key: send Authorization: Bearer <key>")
    return token.strip()


class McpEndpoint:
    """The ASGI app at /mcp: authenticate, then hand the request to the session manager."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = scope["app"]
        state = getattr(app.state, "ctx", None)
        try:
            manager: StreamableHTTPSessionManager | None = (
                state.extras.get(_EXTRA) if state is not None else None
            )
            if manager is None:
                raise ServiceUnavailable("MCP is not running (the app has not started)")
            token = _bearer(scope)
            caller = await caller_cache.authenticate(
                state.extras.get("caller_cache"), state.sessionmaker, token
            )
            if caller is None:
                raise AuthenticationError("Invalid or revoked API key")
            limiter = state.extras.get("rate_limiter")
            if limiter is not None:
                await limiter.check(Request(scope, receive), caller)
        except CtxpackError as exc:
            await _error(exc)(scope, receive, send)
            return
        scope[CALLER_SCOPE_KEY] = caller
        # The session manager binds a stateful session to the principal that opened it.
        scope["user"] = AuthenticatedUser(_access_token(token, caller))
        await manager.handle_request(scope, receive, send)


def _access_token(token: str, caller: Caller) -> AccessToken:
    return AccessToken(
        token=token,
        client_id=str(caller.key_id),
        scopes=sorted(caller.scopes),
        subject=str(caller.org_id),
    )


@contextlib.asynccontextmanager
async def _run_mcp(app: FastAPI, state: Any) -> AsyncIterator[None]:
    """Lifespan hook: build the MCP server on the app's resources and run its session
    manager for as long as the app runs.

    The manager's task group lives in a task of its own: a lifespan may be entered and left
    in different tasks (pytest fixtures do), and a task group must be left where it was
    entered."""
    server = build_server(LocalBackend(state, caller_from_request))
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    running, stop = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        async with manager.run():
            running.set()
            await stop.wait()

    task = asyncio.create_task(run(), name="mcp-session-manager")
    waiter = asyncio.create_task(running.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():  # it failed to start: raise its error
        waiter.cancel()
        task.result()
    state.extras[_EXTRA] = manager
    try:
        yield
    finally:
        state.extras.pop(_EXTRA, None)
        stop.set()
        await task


def install(app: FastAPI, settings: Settings) -> None:
    """Mount /mcp and register the hook that runs it (called from ``service.api.routers``)."""
    app.add_route(PATH, McpEndpoint(), include_in_schema=False)
    app.state.lifespan_hooks.append(_run_mcp)
