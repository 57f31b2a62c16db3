"""MCP over streamable HTTP at ``/mcp``, in the same app and with the same Bearer keys.

Every HTTP request to /mcp is authenticated before the MCP layer sees a byte of it: no key or
a bad key is a 401 JSON error (``{"error": {"code": "unauthorized", ...}}``, the API's shape),
never an MCP session. The caller is then left in the ASGI scope, where the tools find it; the
key's scopes, projects and namespaces apply to every tool as to every endpoint.

Authentication and the rate limit are the call runner's (``service.calls``), as for every
face. The MCP server and its session manager are built once, when the app's lifespan starts
(``McpEndpoint.serving``, entered by the app factory's lifespan), on the resources it
opened; the transport is stateless (each POST is answered on its own, as JSON), so any
worker can serve any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from service.calls import Transport, parse_bearer
from service.domain.auth import Caller
from service.domain.redaction import REDACTOR
from service.errors import CtxpackError, ServiceUnavailable
from service.mcp.backends import CALLER_SCOPE_KEY, LocalBackend, caller_from_request
from service.mcp.server import build_server
from service.resources import Resources

PATH = "/mcp"


def _error(exc: CtxpackError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    if exc.status_code == 429 and "retry_after" in exc.details:
        headers = {"Retry-After": str(exc.details["retry_after"])}
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code, headers=headers)


def _authorization(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return None


# The SDK's answer to a malformed JSON-RPC message quotes the input (pydantic's
# ``input_value=...``), which may hold a secret the caller meant for a tool's arguments.
_INPUT_VALUE = re.compile(r"input_value=.*?, input_type=")


def _quiet_message(message: str) -> str:
    return REDACTOR.redact(_INPUT_VALUE.sub("input_value=<omitted>, input_type=", message)).text


def _quiet_errors(send: Send) -> Send:
    """``send`` for the SDK's answers, with the message of a JSON-RPC error answer (a 4xx)
    stripped of the input it quotes and redacted; every other answer passes as sent."""
    held: list[Message] = []

    async def quiet(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            held.append(message)
            return
        if not held:
            await send(message)
            return
        held.append(message)
        if message.get("more_body"):
            return
        start, *parts = held
        held.clear()
        body = b"".join(part.get("body", b"") for part in parts)
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            answer = json.loads(body)
            error = answer["error"]
            if isinstance(error.get("message"), str):
                error["message"] = await anyio.to_thread.run_sync(
                    _quiet_message, error["message"]
                )
                body = json.dumps(answer).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return quiet


class McpEndpoint:
    """The ASGI app at /mcp: authenticate and rate-limit through the call runner, then hand
    the request to the session manager. The app factory mounts it; ``serving(resources)``
    runs it for the app's lifespan."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self.resources: Resources | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if self.manager is None or self.resources is None:
                raise ServiceUnavailable("MCP is not running (the app has not started)")
            manager, runner = self.manager, self.resources.runner
            token = parse_bearer(_authorization(scope))
            caller = await runner.authenticate(token)
            scope.setdefault("state", {})["caller"] = caller
            await runner.admit(
                caller,
                request={"method": scope.get("method", "POST"), "route": PATH},
                started=scope.get("state", {}).get("started"),
                transport=Transport.MCP,
            )
        except CtxpackError as exc:
            await _error(exc)(scope, receive, send)
            return
        scope[CALLER_SCOPE_KEY] = caller
        # The session manager binds a stateful session to the principal that opened it.
        scope["user"] = AuthenticatedUser(_access_token(token, caller))
        await manager.handle_request(scope, receive, _quiet_errors(send))

    @contextlib.asynccontextmanager
    async def serving(self, resources: Resources) -> AsyncIterator[None]:
        """Build the MCP server on the app's resources and run its session manager for as
        long as the app runs.

        The manager's task group lives in a task of its own: a lifespan may be entered and
        left in different tasks (pytest fixtures do), and a task group must be left where it
        was entered."""
        server = build_server(LocalBackend(resources, caller_from_request))
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
        self.manager, self.resources = manager, resources
        try:
            yield
        finally:
            self.manager = self.resources = None
            stop.set()
            await task


def _access_token(token: str, caller: Caller) -> AccessToken:
    return AccessToken(
        token=token,
        client_id=str(caller.key_id),
        scopes=sorted(caller.scopes),
        subject=str(caller.org_id),
    )
