"""The operations of ctxpack, declared once: what each is called, the audit action its row
carries, the model it answers, where it runs, whether it only reads or destroys, and its HTTP
route; for the operations an MCP tool runs, also its arguments (``request``) and the domain
function that answers them (``call``). The faces read this table instead of restating it: the
MCP tool specs take their action and their read-only / destructive / idempotent hints from it
(service/mcp/tools.py), both MCP backends run any operation from its row alone
(service/mcp/backends.py: ``LocalBackend.run`` calls ``call`` through the call runner,
``RemoteBackend.run`` sends ``request`` to the HTTP route), the console runs its calls by it
(service/console/), and a test checks every route and tool against it
(tests/test_operations.py). Tool descriptions, written for models, stay with the tools.

Adding an operation an MCP tool runs is: a row here (with its request model and domain call)
and its ``ToolSpec`` in service/mcp/tools.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from service.domain import artifacts as artifact_service
from service.domain import assemble as assemble_service
from service.domain import context as context_service
from service.domain import erase as erase_service
from service.domain import memories as memory_service
from service.domain import remember as remember_service
from service.domain import tool_results as tool_result_service
from service.domain.audit import AuditAction, AuditContext
from service.domain.auth import Caller
from service.schemas.artifacts import (
    ArtifactCreate,
    ArtifactCreated,
    ArtifactDeleted,
    ArtifactFields,
    ArtifactQuery,
    ArtifactRef,
)
from service.schemas.assemble import AssembleRequest, AssembleResponse
from service.schemas.audit import ReplayResponse
from service.schemas.context import ContextRequest, ContextResponse
from service.schemas.lifecycle import EraseReceipt, NamespaceRef
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryQuery,
    MemoryRef,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
)
from service.schemas.tool_results import ToolResultRequest, ToolResultResponse

if TYPE_CHECKING:
    from service.resources import Resources

Pool = Literal["write", "pack", "read"]
Req = TypeVar("Req", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)

DomainCall = Callable[["Resources", AsyncSession, Caller, AuditContext, Req], Awaitable[Out]]
"""The domain function of an operation, given the process's resources, the unit of work, the
authenticated caller, the call's audit context and the arguments (its ``request``)."""


@dataclass(frozen=True)
class Operation(Generic[Req, Out]):
    """One operation, whatever face it is called through.

    Attributes:
        name: its name (the MCP tool's, where it is one).
        action: the audit action of its row.
        output: what it answers.
        http: ``METHOD /path`` of its HTTP route ("" for none).
        pool: where its unit of work runs (``pack``: the packs' pool; ``read``: a replica
            when one is configured).
        read_only: changes nothing stored (its own audit row aside).
        destructive: deletes what cannot be brought back.
        idempotent: the same call twice leaves what once did.
        request: its arguments, one model (route parameters by their names in ``http``; the
            rest is the query of a GET or DELETE, else the JSON body). None: run by no
            backend.
        call: the domain function that answers ``request``.
    """

    name: str
    action: AuditAction
    output: type[Out]
    http: str = ""
    pool: Pool = "write"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    request: type[Req] | None = None
    call: DomainCall[Req, Out] | None = None

    async def answer(
        self, res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, request: Req
    ) -> Out:
        """Answer ``request`` with the operation's domain call, in the unit of work and audit
        context the face opened through the call runner. Every face reaches an operation
        that declares a call this way (the HTTP routes, the MCP local backend, the
        console), never by calling the domain function itself (tests/test_operations.py)."""
        if self.call is None:
            raise TypeError(f"operation {self.name!r} declares no domain call")
        return await self.call(res, session, caller, ctx, request)


# --- the domain calls of the operations (those the MCP backends run, and others) ---------------


async def _remember(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, req: RememberRequest
) -> RememberResponse:
    return await remember_service.remember(session, res.embedder, res.settings, caller, req, ctx)


async def _remember_batch(
    res: Resources,
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    req: RememberBatchRequest,
) -> RememberBatchResponse:
    return await remember_service.remember_batch(
        session, res.embedder, res.settings, caller, req, ctx, res.text_workers
    )


async def _context(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, req: ContextRequest
) -> ContextResponse:
    return await context_service.compile_context(
        session, res.embedder, res.settings, caller, ctx, req
    )


async def _list_memories(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, q: MemoryQuery
) -> MemoryPage:
    return await memory_service.list_memories(
        session, caller, ctx, namespace=q.namespace, type_=q.type, project=q.project,
        agent_id=q.agent_id, tag=q.tag, key=q.key, offset=q.offset, limit=q.limit,
    )


async def _get_memory(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, ref: MemoryRef
) -> MemoryOut:
    return await memory_service.get_memory(session, caller, ref.memory_id, ctx)


async def _forget(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, ref: MemoryRef
) -> DeleteResponse:
    return await memory_service.delete_memory(session, caller, ref.memory_id, ctx)


async def _erase_namespace(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, ref: NamespaceRef
) -> EraseReceipt:
    return await erase_service.erase_namespace(session, caller, ref.namespace, ctx)


async def _store_artifact(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, req: ArtifactCreate
) -> ArtifactCreated:
    return await artifact_service.store_artifact(
        session, res.embedder, caller, ctx, req, res.settings.max_scanned_bytes
    )


async def _delete_artifact(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, ref: ArtifactRef
) -> ArtifactDeleted:
    return await artifact_service.delete_artifact(session, caller, ctx, ref.artifact_id)


async def _recall_artifact(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, q: ArtifactQuery
) -> ArtifactFields:
    return await artifact_service.read_artifact(
        session, caller, ctx, q.artifact_id, q.fields, q.namespace
    )


async def _tool_result(
    res: Resources,
    session: AsyncSession,
    caller: Caller,
    ctx: AuditContext,
    req: ToolResultRequest,
) -> ToolResultResponse:
    return await tool_result_service.envelope_call(
        session, res.embedder, caller, ctx, req, res.settings.max_scanned_bytes
    )


async def _assemble(
    res: Resources, session: AsyncSession, caller: Caller, ctx: AuditContext, req: AssembleRequest
) -> AssembleResponse:
    return await assemble_service.assemble(session, res.embedder, res.settings, caller, ctx, req)


# --- the table ------------------------------------------------------------------------------------


REMEMBER = Operation("remember", AuditAction.REMEMBER, RememberResponse,
                     "POST /v1/remember", idempotent=True,
                     request=RememberRequest, call=_remember)
REMEMBER_BATCH = Operation("remember_batch", AuditAction.REMEMBER_BATCH, RememberBatchResponse,
                           "POST /v1/remember/batch", idempotent=True,
                           request=RememberBatchRequest, call=_remember_batch)
CONTEXT = Operation("context", AuditAction.CONTEXT, ContextResponse, "POST /v1/context",
                    pool="pack", read_only=True, idempotent=True,
                    request=ContextRequest, call=_context)
WAKE = Operation("wake", AuditAction.CONTEXT, ContextResponse, "POST /v1/context",
                 pool="pack", read_only=True, idempotent=True,
                 request=ContextRequest, call=_context)
LIST_MEMORIES = Operation("list_memories", AuditAction.LIST, MemoryPage, "GET /v1/memories",
                          pool="read", read_only=True, idempotent=True,
                          request=MemoryQuery, call=_list_memories)
GET_MEMORY = Operation("get_memory", AuditAction.MEMORY_GET, MemoryOut,
                       "GET /v1/memories/{memory_id}", read_only=True, idempotent=True,
                       request=MemoryRef, call=_get_memory)
UPDATE_MEMORY: Operation[Any, MemoryOut] = Operation(
    "update_memory", AuditAction.MEMORY_UPDATE, MemoryOut, "PATCH /v1/memories/{memory_id}")
FORGET = Operation("forget", AuditAction.DELETE, DeleteResponse,
                   "DELETE /v1/memories/{memory_id}", destructive=True, idempotent=True,
                   request=MemoryRef, call=_forget)
ERASE_NAMESPACE = Operation("erase_namespace", AuditAction.ERASE, EraseReceipt,
                            "DELETE /v1/namespaces/{namespace}", destructive=True,
                            idempotent=True, request=NamespaceRef, call=_erase_namespace)
STORE_ARTIFACT = Operation("store_artifact", AuditAction.ARTIFACT, ArtifactCreated,
                           "POST /v1/artifacts", request=ArtifactCreate, call=_store_artifact)
RECALL_ARTIFACT = Operation("recall_artifact", AuditAction.ARTIFACT, ArtifactFields,
                            "GET /v1/artifacts/{artifact_id}", read_only=True, idempotent=True,
                            request=ArtifactQuery, call=_recall_artifact)
DELETE_ARTIFACT = Operation("delete_artifact", AuditAction.ARTIFACT, ArtifactDeleted,
                            "DELETE /v1/artifacts/{artifact_id}", destructive=True,
                            idempotent=True, request=ArtifactRef, call=_delete_artifact)
REPLAY: Operation[Any, ReplayResponse] = Operation(
    "replay", AuditAction.REPLAY, ReplayResponse, "POST /v1/audit/{audit_id}/replay",
    pool="pack", read_only=True)
TOOL_RESULT = Operation("tool_result", AuditAction.TOOL_RESULT, ToolResultResponse,
                        "POST /v1/tool-results", read_only=True, idempotent=True,
                        request=ToolResultRequest, call=_tool_result)
ASSEMBLE = Operation("assemble", AuditAction.ASSEMBLE, AssembleResponse, "POST /v1/assemble",
                     pool="pack", read_only=True, idempotent=True,
                     request=AssembleRequest, call=_assemble)
CONSOLE_LOGIN: Operation[Any, BaseModel] = Operation(
    "console_login", AuditAction.CONSOLE_LOGIN, BaseModel)
CONSOLE_LOGOUT: Operation[Any, BaseModel] = Operation(
    "console_logout", AuditAction.CONSOLE_LOGOUT, BaseModel, idempotent=True)
KEY_CREATE: Operation[Any, BaseModel] = Operation("key_create", AuditAction.KEY_CREATE, BaseModel)
KEY_REVOKE: Operation[Any, BaseModel] = Operation(
    "key_revoke", AuditAction.KEY_REVOKE, BaseModel, destructive=True, idempotent=True)
# ``ctxpack import`` and ``ctxpack export`` (service/lifecycle/transfer.py): CLI only, run
# through the call runner (transport ``cli``); a file is their argument, not a model.
IMPORT: Operation[Any, BaseModel] = Operation("import", AuditAction.IMPORT, BaseModel, idempotent=True)
EXPORT: Operation[Any, BaseModel] = Operation("export", AuditAction.EXPORT, BaseModel, read_only=True)

OPERATIONS: dict[str, Operation[Any, Any]] = {
    op.name: op
    for op in (
        REMEMBER, REMEMBER_BATCH, CONTEXT, WAKE, LIST_MEMORIES, GET_MEMORY, UPDATE_MEMORY,
        FORGET, ERASE_NAMESPACE, STORE_ARTIFACT, RECALL_ARTIFACT, DELETE_ARTIFACT, REPLAY,
        TOOL_RESULT, ASSEMBLE, KEY_CREATE, KEY_REVOKE, CONSOLE_LOGIN, CONSOLE_LOGOUT, IMPORT,
        EXPORT,
    )
}
