"""The operations of ctxpack, declared once: what each is called, the audit action its row
carries, the model it answers, where it runs, whether it only reads or destroys, and its HTTP
route. The faces read this table instead of restating it: the MCP tool specs take their
action and their read-only / destructive / idempotent hints from it (service/mcp/tools.py),
the console runs its calls by it (service/console/), and a test checks every route and tool
against it (tests/test_operations.py). Tool descriptions, written for models, stay with the
tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from service.domain.audit import AuditAction
from service.schemas.artifacts import ArtifactCreated, ArtifactDeleted, ArtifactFields
from service.schemas.assemble import AssembleResponse
from service.schemas.audit import ReplayResponse
from service.schemas.context import ContextResponse
from service.schemas.lifecycle import EraseReceipt
from service.schemas.memories import (
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    RememberBatchResponse,
    RememberResponse,
)
from service.schemas.tool_results import ToolResultResponse

Pool = Literal["write", "pack", "read"]


@dataclass(frozen=True)
class Operation:
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
    """

    name: str
    action: AuditAction
    output: type[BaseModel]
    http: str = ""
    pool: Pool = "write"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


REMEMBER = Operation("remember", AuditAction.REMEMBER, RememberResponse,
                     "POST /v1/remember", idempotent=True)
REMEMBER_BATCH = Operation("remember_batch", AuditAction.REMEMBER_BATCH, RememberBatchResponse,
                           "POST /v1/remember/batch", idempotent=True)
CONTEXT = Operation("context", AuditAction.CONTEXT, ContextResponse, "POST /v1/context",
                    pool="pack", read_only=True, idempotent=True)
WAKE = Operation("wake", AuditAction.CONTEXT, ContextResponse, "POST /v1/context",
                 pool="pack", read_only=True, idempotent=True)
LIST_MEMORIES = Operation("list_memories", AuditAction.LIST, MemoryPage, "GET /v1/memories",
                          pool="read", read_only=True, idempotent=True)
GET_MEMORY = Operation("get_memory", AuditAction.MEMORY_GET, MemoryOut,
                       "GET /v1/memories/{memory_id}", read_only=True, idempotent=True)
UPDATE_MEMORY = Operation("update_memory", AuditAction.MEMORY_UPDATE, MemoryOut,
                          "PATCH /v1/memories/{memory_id}")
FORGET = Operation("forget", AuditAction.DELETE, DeleteResponse,
                   "DELETE /v1/memories/{memory_id}", destructive=True, idempotent=True)
ERASE_NAMESPACE = Operation("erase_namespace", AuditAction.ERASE, EraseReceipt,
                            "DELETE /v1/namespaces/{namespace}", destructive=True,
                            idempotent=True)
STORE_ARTIFACT = Operation("store_artifact", AuditAction.ARTIFACT, ArtifactCreated,
                           "POST /v1/artifacts")
RECALL_ARTIFACT = Operation("recall_artifact", AuditAction.ARTIFACT, ArtifactFields,
                            "GET /v1/artifacts/{artifact_id}", read_only=True, idempotent=True)
DELETE_ARTIFACT = Operation("delete_artifact", AuditAction.ARTIFACT, ArtifactDeleted,
                            "DELETE /v1/artifacts/{artifact_id}", destructive=True,
                            idempotent=True)
REPLAY = Operation("replay", AuditAction.REPLAY, ReplayResponse,
                   "POST /v1/audit/{audit_id}/replay", pool="pack", read_only=True)
TOOL_RESULT = Operation("tool_result", AuditAction.TOOL_RESULT, ToolResultResponse,
                        "POST /v1/tool-results", read_only=True, idempotent=True)
ASSEMBLE = Operation("assemble", AuditAction.ASSEMBLE, AssembleResponse, "POST /v1/assemble",
                     pool="pack", read_only=True, idempotent=True)
CONSOLE_LOGIN = Operation("console_login", AuditAction.CONSOLE_LOGIN, BaseModel)
CONSOLE_LOGOUT = Operation("console_logout", AuditAction.CONSOLE_LOGOUT, BaseModel,
                           idempotent=True)
KEY_CREATE = Operation("key_create", AuditAction.KEY_CREATE, BaseModel)
KEY_REVOKE = Operation("key_revoke", AuditAction.KEY_REVOKE, BaseModel, destructive=True,
                       idempotent=True)

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        REMEMBER, REMEMBER_BATCH, CONTEXT, WAKE, LIST_MEMORIES, GET_MEMORY, UPDATE_MEMORY,
        FORGET, ERASE_NAMESPACE, STORE_ARTIFACT, RECALL_ARTIFACT, DELETE_ARTIFACT, REPLAY,
        TOOL_RESULT, ASSEMBLE, KEY_CREATE, KEY_REVOKE, CONSOLE_LOGIN, CONSOLE_LOGOUT,
    )
}
