"""Where the tools' calls go: the domain functions in this process, or a remote ctxpack.

``LocalBackend`` is what the HTTP API is: one unit of work per call (commit on success,
roll back on error) around one domain function, the caller's key checked on every call, one
audit row per call under the same action names as HTTP (the domain function writes it on
success; a failure row is written in a fresh transaction, as the API's error handler does).

``RemoteBackend`` forwards each call to a ctxpack over HTTP with the caller's key, so the
remote server authenticates, audits and applies the key's limits.

Both build nothing per call: the engine, sessionmaker and embedder (or the HTTP client) are
built once and handed in.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.config import Settings
from service.domain import artifacts as artifact_service
from service.domain import audit as audit_service
from service.domain import context as context_service
from service.domain import keys as key_service
from service.domain import memories as memory_service
from service.domain import remember as remember_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.embedding import AsyncEmbedder
from service.errors import (
    AuthenticationError,
    CtxpackError,
    GateRejected,
    ServiceUnavailable,
)
from service.mcp.inputs import ListMemoriesInput, RecallArtifactInput
from service.schemas.artifacts import ArtifactFields
from service.schemas.context import ContextRequest, ContextResponse
from service.schemas.memories import (
    DeleteResponse,
    MemoryPage,
    RememberRequest,
    RememberResponse,
)

log = logging.getLogger("ctxpack.mcp")

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CALLER_SCOPE_KEY = "ctxpack.caller"
"""Where the /mcp endpoint leaves the authenticated ``Caller`` in the ASGI scope."""


class RemoteError(Exception):
    """An error answered by a remote ctxpack: its HTTP status and its ``error`` body, whose
    ``code`` is one of the error tree's."""

    def __init__(self, status_code: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", "remote error"))
        self.status_code = status_code
        self.body = body


class Backend(Protocol):
    """What the tools call. ``rc`` is the MCP request context (it carries the HTTP request
    on /mcp); a backend uses it only to find the caller."""

    async def remember(self, rc: Any, req: RememberRequest) -> RememberResponse: ...

    async def list_memories(self, rc: Any, query: ListMemoriesInput) -> MemoryPage: ...

    async def forget(self, rc: Any, memory_id: uuid.UUID) -> DeleteResponse: ...

    async def context(self, rc: Any, req: ContextRequest) -> ContextResponse: ...

    async def recall_artifact(self, rc: Any, query: RecallArtifactInput) -> ArtifactFields: ...

    async def refused(self, rc: Any, action: str, error: CtxpackError) -> None:
        """Record a call refused before it reached the domain (invalid arguments)."""
        ...


class Resources(Protocol):
    """What a local backend needs; ``AppState`` has it, built once in the app lifespan."""

    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: AsyncEmbedder


CallerResolver = Callable[[Any], Awaitable[Caller]]


async def caller_from_request(rc: Any) -> Caller:
    """The caller the /mcp endpoint authenticated for this HTTP request."""
    request = getattr(rc, "request", None)
    caller = request.scope.get(CALLER_SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):
        raise AuthenticationError("Missing API key: send Authorization: Bearer <key>")
    return caller


def caller_from_key(sessionmaker: async_sessionmaker[AsyncSession], key: str) -> CallerResolver:
    """Authenticate ``key`` on every call, so a revoked key stops working at once."""

    async def resolve(rc: Any) -> Caller:
        async with sessionmaker() as session:
            caller = await key_service.authenticate(session, key)
        if caller is None:
            raise AuthenticationError("Invalid or revoked API key")
        return caller

    return resolve


def _status_outcome(status: int) -> str:
    return "rejected" if status == 422 else "error" if status >= 500 else "refused"


class LocalBackend:
    """Calls the domain functions in this process."""

    def __init__(self, resources: Resources, resolve_caller: CallerResolver) -> None:
        self.resources = resources
        self.resolve_caller = resolve_caller

    async def _call(
        self,
        rc: Any,
        action: str,
        fn: Callable[[AsyncSession, Caller, AuditContext], Awaitable[T]],
        sessionmaker: async_sessionmaker[AsyncSession] | None = None,
    ) -> T:
        caller = await self.resolve_caller(rc)
        ctx = AuditContext(action=action, caller=caller)
        try:
            async with (sessionmaker or self.resources.sessionmaker)() as session:
                try:
                    result = await fn(session, caller, ctx)
                    await session.commit()
                except BaseException:
                    await session.rollback()
                    raise
        except CtxpackError as exc:
            await self._audit_failure(ctx, exc)
            raise
        except Exception:
            await self._audit_failure(ctx, None)
            raise
        return result

    async def _audit_failure(self, ctx: AuditContext, exc: CtxpackError | None) -> None:
        """The failure row, in its own transaction: the call's own work was rolled back."""
        status = exc.status_code if exc is not None else 500
        details: dict[str, Any] = {"error_code": exc.code if exc is not None else "internal_error"}
        if isinstance(exc, GateRejected):
            details["reasons"] = [r["code"] for r in exc.reasons]
        if exc is not None and "field" in exc.details:
            details["field"] = exc.details["field"]
        details["transport"] = "mcp"
        try:
            async with self.resources.sessionmaker() as session:
                await audit_service.record(
                    session,
                    ctx,
                    outcome=_status_outcome(status),
                    status_code=status,
                    details=details,
                    rejection_count=1 if status == 422 else 0,
                    redaction_count=int(ctx.request.get("redaction_count", 0)),
                )
                await session.commit()
        except Exception:  # the failure being reported matters more than its audit row
            log.exception("audit_write_failed", extra={"action": ctx.action})

    async def refused(self, rc: Any, action: str, error: CtxpackError) -> None:
        caller = await self.resolve_caller(rc)
        await self._audit_failure(AuditContext(action=action, caller=caller), error)

    async def remember(self, rc: Any, req: RememberRequest) -> RememberResponse:
        res = self.resources

        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> RememberResponse:
            return await remember_service.remember(
                session, res.embedder, res.settings, caller, req, ctx
            )

        return await self._call(rc, "remember", run)

    async def list_memories(self, rc: Any, query: ListMemoriesInput) -> MemoryPage:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> MemoryPage:
            return await memory_service.list_memories(
                session,
                caller,
                ctx,
                namespace=query.namespace,
                type_=query.type,
                project=query.project,
                agent_id=query.agent_id,
                tag=query.tag,
                key=query.key,
                offset=query.offset,
                limit=query.limit,
            )

        return await self._call(rc, "list", run)

    async def forget(self, rc: Any, memory_id: uuid.UUID) -> DeleteResponse:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> DeleteResponse:
            return await memory_service.delete_memory(session, caller, memory_id, ctx)

        return await self._call(rc, "delete", run)

    async def context(self, rc: Any, req: ContextRequest) -> ContextResponse:
        res = self.resources

        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ContextResponse:
            return await context_service.compile_context(
                session, res.embedder, res.settings, caller, ctx, req
            )

        packs = getattr(res, "pack_sessionmaker", None)
        return await self._call(rc, "context", run, packs)

    async def recall_artifact(self, rc: Any, query: RecallArtifactInput) -> ArtifactFields:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ArtifactFields:
            return await artifact_service.read_artifact(
                session, caller, ctx, query.artifact_id, query.fields_param(), query.namespace
            )

        return await self._call(rc, "artifact", run)


class RemoteBackend:
    """Forwards each call to a ctxpack's HTTP API, presenting the key as a Bearer token."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    @staticmethod
    def make_client(url: str, key: str, timeout: float = 60.0) -> httpx.AsyncClient:
        """One client per process, reused for every call."""
        return httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}", "User-Agent": "ctxpack-mcp"},
            timeout=timeout,
        )

    async def _request(
        self, method: str, path: str, model: type[M], *, json: Any = None, params: Any = None
    ) -> M:
        try:
            response = await self.client.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(
                f"cannot reach ctxpack at {self.client.base_url}: {type(exc).__name__}"
            ) from exc
        if response.status_code >= 400:
            try:
                body = response.json()["error"]
                if not isinstance(body, dict) or "code" not in body:
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                body = {
                    "code": "unavailable" if response.status_code >= 500 else "http_error",
                    "message": f"ctxpack answered HTTP {response.status_code}",
                }
            raise RemoteError(response.status_code, body)
        return model.model_validate(response.json())

    async def whoami(self) -> dict[str, Any]:
        """Check the key against the remote server (used once, at start-up)."""
        from service.schemas.common import WhoAmI

        return (await self._request("GET", "/v1/whoami", WhoAmI)).model_dump()

    async def refused(self, rc: Any, action: str, error: CtxpackError) -> None:
        return None  # the remote server never saw the call; there is nothing to audit

    async def remember(self, rc: Any, req: RememberRequest) -> RememberResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return await self._request("POST", "/v1/remember", RememberResponse, json=body)

    async def list_memories(self, rc: Any, query: ListMemoriesInput) -> MemoryPage:
        params = query.model_dump(exclude_none=True, exclude={"max_bytes"})
        return await self._request("GET", "/v1/memories", MemoryPage, params=params)

    async def forget(self, rc: Any, memory_id: uuid.UUID) -> DeleteResponse:
        return await self._request("DELETE", f"/v1/memories/{memory_id}", DeleteResponse)

    async def context(self, rc: Any, req: ContextRequest) -> ContextResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return await self._request("POST", "/v1/context", ContextResponse, json=body)

    async def recall_artifact(self, rc: Any, query: RecallArtifactInput) -> ArtifactFields:
        params = {"fields": query.fields_param(), "namespace": query.namespace}
        return await self._request(
            "GET",
            f"/v1/artifacts/{query.artifact_id}",
            ArtifactFields,
            params={k: v for k, v in params.items() if v is not None},
        )


__all__ = [
    "CALLER_SCOPE_KEY",
    "Backend",
    "LocalBackend",
    "RemoteBackend",
    "RemoteError",
    "caller_from_key",
    "caller_from_request",
]
