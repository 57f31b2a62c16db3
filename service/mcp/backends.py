"""Where the tools' calls go: the domain functions in this process, or a remote ctxpack.

``LocalBackend`` runs each call through the call runner (``service.calls``), as the HTTP API
does: the caller's key checked on every call, its rate limit, one unit of work around one
domain function, one audit row per call under the same action names as HTTP.

``RemoteBackend`` forwards each call to a ctxpack over HTTP with the caller's key, so the
remote server authenticates, audits and applies the key's limits (through the one HTTP client
of ctxpack, service/remote.py, which ingest's HTTP target uses too).

Both build nothing per call: the resources (``open_resources``; or the HTTP client) are
built once and handed in.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from mcp.server import ServerRequestContext
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from service.calls import Transport
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.errors import AuthenticationError, CtxpackError
from service.operations import Operation
from service.remote import CtxpackHttp, RemoteError
from service.resources import Resources

Req = TypeVar("Req", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)

CALLER_SCOPE_KEY = "ctxpack.caller"
"""Where the /mcp endpoint leaves the authenticated ``Caller`` in the ASGI scope."""


RequestContext = ServerRequestContext[Any, Any]
"""The MCP SDK's request context of a tool call (it carries the HTTP request on /mcp)."""

_ROUTE_PARAM = re.compile(r"{(\w+)}")


class Backend(Protocol):
    """What the tools call. ``rc`` is the MCP request context; a backend uses it only to
    find the caller."""

    async def run(self, rc: RequestContext, op: Operation[Req, Out], request: Req) -> Out:
        """Run ``op`` (a row of service/operations.py) on ``request``, its arguments."""
        ...

    async def refused(self, rc: RequestContext, action: AuditAction, error: CtxpackError) -> None:
        """Record a call refused before it reached the domain (invalid arguments)."""
        ...


Credential = Callable[[RequestContext | None], Caller | str]
"""Who a tool call acts for: an authenticated ``Caller``, or a key the call runner checks."""


def caller_from_request(rc: RequestContext | None) -> Caller:
    """The caller the /mcp endpoint authenticated for this HTTP request."""
    request = getattr(rc, "request", None)
    caller = request.scope.get(CALLER_SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):
        raise AuthenticationError("Missing API key: send Authorization: Bearer <key>")
    return caller


def bearer_key(key: str) -> Credential:
    """Act as ``key``: the call runner authenticates it (and applies its rate limit) on
    every call, so a revoked key stops working at once."""

    def credential(rc: RequestContext | None) -> str:
        return key

    return credential


class LocalBackend:
    """Calls the domain functions in this process, each through the call runner."""

    def __init__(self, resources: Resources, credential: Credential) -> None:
        self.resources = resources
        self.credential = credential

    async def run(self, rc: RequestContext, op: Operation[Req, Out], request: Req) -> Out:
        """One call of ``op``: its domain call, audit action and pool are the operation
        table's (service/operations.py)."""
        res = self.resources

        async def fn(session: AsyncSession, caller: Caller, ctx: AuditContext) -> Out:
            return await op.answer(res, session, caller, ctx, request)

        return await res.runner.run(
            self.credential(rc),
            op.action,
            fn,
            pool=op.pool,
            transport=Transport.MCP,
            request={"tool": str(op.action)},
            read_only=op.read_only,
        )

    async def refused(self, rc: RequestContext, action: AuditAction, error: CtxpackError) -> None:
        await self.resources.runner.refuse(
            self.credential(rc), action, error, transport=Transport.MCP
        )


class RemoteBackend:
    """Forwards each call to a ctxpack's HTTP API, presenting the key as a Bearer token."""

    def __init__(self, client: CtxpackHttp) -> None:
        self.client = client

    async def _request(
        self, method: str, path: str, model: type[M], *, json: Any = None, params: Any = None
    ) -> M:
        return await self.client.call(method, path, model, json=json, params=params)

    async def whoami(self) -> dict[str, Any]:
        """Check the key against the remote server (used once, at start-up)."""
        from service.schemas.common import WhoAmI

        return (await self._request("GET", "/v1/whoami", WhoAmI)).model_dump()

    async def refused(
        self, rc: RequestContext, action: AuditAction, error: CtxpackError
    ) -> None:
        return None  # the remote server never saw the call; there is nothing to audit

    async def run(self, rc: RequestContext, op: Operation[Req, Out], request: Req) -> Out:
        """Call ``op``'s HTTP route (its method and path are the operation table's,
        service/operations.py): the route's parameters are the request's fields of their
        names; the other fields are the query of a GET or DELETE (unset ones left out), else
        the JSON body (fields the caller did not set left out). The answer is parsed as the
        operation's output model."""
        method, route = op.http.split(" ", 1)
        names = set(_ROUTE_PARAM.findall(route))
        url = route.format(
            **{
                name: urllib.parse.quote(str(getattr(request, name)), safe=":")
                for name in names
            }
        )
        json: Any = None
        params: Any = None
        if method in ("GET", "DELETE"):
            params = request.model_dump(mode="json", exclude_none=True, exclude=names) or None
        else:
            json = request.model_dump(mode="json", exclude_unset=True, exclude=names)
        return await self.client.call(method, url, op.output, json=json, params=params)


__all__ = [
    "CALLER_SCOPE_KEY",
    "Backend",
    "Credential",
    "LocalBackend",
    "RemoteBackend",
    "RemoteError",
    "RequestContext",
    "bearer_key",
    "caller_from_request",
]
