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

import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from mcp.server import ServerRequestContext
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from service import operations
from service.calls import CallFn, Transport
from service.domain import artifacts as artifact_service
from service.domain import assemble as assemble_service
from service.domain import context as context_service
from service.domain import erase as erase_service
from service.domain import memories as memory_service
from service.domain import remember as remember_service
from service.domain import tool_results as tool_result_service
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.errors import AuthenticationError, CtxpackError
from service.mcp.inputs import ListMemoriesInput, RecallArtifactInput
from service.operations import Operation
from service.remote import CtxpackHttp, RemoteError
from service.resources import Resources
from service.schemas.artifacts import ArtifactFields
from service.schemas.assemble import AssembleRequest, AssembleResponse
from service.schemas.context import ContextRequest, ContextResponse
from service.schemas.lifecycle import EraseReceipt
from service.schemas.memories import (
    DeleteResponse,
    MemoryPage,
    RememberRequest,
    RememberResponse,
)
from service.schemas.tool_results import ToolResultRequest, ToolResultResponse

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CALLER_SCOPE_KEY = "ctxpack.caller"
"""Where the /mcp endpoint leaves the authenticated ``Caller`` in the ASGI scope."""


RequestContext = ServerRequestContext[Any, Any]
"""The MCP SDK's request context of a tool call (it carries the HTTP request on /mcp)."""


class Backend(Protocol):
    """What the tools call. ``rc`` is the MCP request context; a backend uses it only to
    find the caller."""

    async def remember(self, rc: RequestContext, req: RememberRequest) -> RememberResponse: ...

    async def list_memories(self, rc: RequestContext, query: ListMemoriesInput) -> MemoryPage: ...

    async def forget(self, rc: RequestContext, memory_id: uuid.UUID) -> DeleteResponse: ...

    async def erase_namespace(self, rc: RequestContext, namespace: str) -> EraseReceipt: ...

    async def context(self, rc: RequestContext, req: ContextRequest) -> ContextResponse: ...

    async def recall_artifact(
        self, rc: RequestContext, query: RecallArtifactInput
    ) -> ArtifactFields: ...

    async def tool_result(
        self, rc: RequestContext, req: ToolResultRequest
    ) -> ToolResultResponse: ...

    async def assemble(self, rc: RequestContext, req: AssembleRequest) -> AssembleResponse: ...

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

    async def _call(self, rc: RequestContext, op: Operation, fn: CallFn[T]) -> T:
        """Run ``fn`` as one call of ``op``: its audit action and pool are the operation
        table's (service/operations.py)."""
        return await self.resources.runner.run(
            self.credential(rc),
            op.action,
            fn,
            pool=op.pool,
            transport=Transport.MCP,
            request={"tool": str(op.action)},
        )

    async def refused(self, rc: RequestContext, action: AuditAction, error: CtxpackError) -> None:
        await self.resources.runner.refuse(
            self.credential(rc), action, error, transport=Transport.MCP
        )

    async def remember(self, rc: RequestContext, req: RememberRequest) -> RememberResponse:
        res = self.resources

        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> RememberResponse:
            return await remember_service.remember(
                session, res.embedder, res.settings, caller, req, ctx
            )

        return await self._call(rc, operations.REMEMBER, run)

    async def list_memories(self, rc: RequestContext, query: ListMemoriesInput) -> MemoryPage:
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

        return await self._call(rc, operations.LIST_MEMORIES, run)

    async def forget(self, rc: RequestContext, memory_id: uuid.UUID) -> DeleteResponse:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> DeleteResponse:
            return await memory_service.delete_memory(session, caller, memory_id, ctx)

        return await self._call(rc, operations.FORGET, run)

    async def erase_namespace(self, rc: RequestContext, namespace: str) -> EraseReceipt:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> EraseReceipt:
            return await erase_service.erase_namespace(session, caller, namespace, ctx)

        return await self._call(rc, operations.ERASE_NAMESPACE, run)

    async def context(self, rc: RequestContext, req: ContextRequest) -> ContextResponse:
        res = self.resources

        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ContextResponse:
            return await context_service.compile_context(
                session, res.embedder, res.settings, caller, ctx, req
            )

        return await self._call(rc, operations.CONTEXT, run)

    async def recall_artifact(
        self, rc: RequestContext, query: RecallArtifactInput
    ) -> ArtifactFields:
        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> ArtifactFields:
            return await artifact_service.read_artifact(
                session, caller, ctx, query.artifact_id, query.fields_param(), query.namespace
            )

        return await self._call(rc, operations.RECALL_ARTIFACT, run)

    async def tool_result(self, rc: RequestContext, req: ToolResultRequest) -> ToolResultResponse:
        res = self.resources

        async def run(
            session: AsyncSession, caller: Caller, ctx: AuditContext
        ) -> ToolResultResponse:
            return await tool_result_service.envelope_call(session, res.embedder, caller, ctx, req)

        return await self._call(rc, operations.TOOL_RESULT, run)

    async def assemble(self, rc: RequestContext, req: AssembleRequest) -> AssembleResponse:
        res = self.resources

        async def run(session: AsyncSession, caller: Caller, ctx: AuditContext) -> AssembleResponse:
            return await assemble_service.assemble(
                session, res.embedder, res.settings, caller, ctx, req
            )

        return await self._call(rc, operations.ASSEMBLE, run)


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

    async def _forward(
        self, op: Operation, *, json: Any = None, params: Any = None, **path: object
    ) -> Any:
        """Call ``op``'s HTTP route (its method and path are the operation table's,
        service/operations.py), the answer as its output model."""
        method, route = op.http.split(" ", 1)
        url = route.format(**{k: urllib.parse.quote(str(v), safe=":") for k, v in path.items()})
        return await self.client.call(method, url, op.output, json=json, params=params)

    async def remember(self, rc: RequestContext, req: RememberRequest) -> RememberResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return cast(RememberResponse, await self._forward(operations.REMEMBER, json=body))

    async def list_memories(self, rc: RequestContext, query: ListMemoriesInput) -> MemoryPage:
        params = query.model_dump(exclude_none=True, exclude={"max_bytes"})
        return cast(MemoryPage, await self._forward(operations.LIST_MEMORIES, params=params))

    async def forget(self, rc: RequestContext, memory_id: uuid.UUID) -> DeleteResponse:
        return cast(DeleteResponse, await self._forward(operations.FORGET, memory_id=memory_id))

    async def erase_namespace(self, rc: RequestContext, namespace: str) -> EraseReceipt:
        answer = await self._forward(operations.ERASE_NAMESPACE, namespace=namespace)
        return cast(EraseReceipt, answer)

    async def context(self, rc: RequestContext, req: ContextRequest) -> ContextResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return cast(ContextResponse, await self._forward(operations.CONTEXT, json=body))

    async def recall_artifact(self, rc: RequestContext, query: RecallArtifactInput) -> ArtifactFields:
        params = {"fields": query.fields_param(), "namespace": query.namespace}
        answer = await self._forward(
            operations.RECALL_ARTIFACT,
            params={k: v for k, v in params.items() if v is not None},
            artifact_id=query.artifact_id,
        )
        return cast(ArtifactFields, answer)

    async def tool_result(self, rc: RequestContext, req: ToolResultRequest) -> ToolResultResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return cast(ToolResultResponse, await self._forward(operations.TOOL_RESULT, json=body))

    async def assemble(self, rc: RequestContext, req: AssembleRequest) -> AssembleResponse:
        body = req.model_dump(mode="json", exclude_unset=True)
        return cast(AssembleResponse, await self._forward(operations.ASSEMBLE, json=body))


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
