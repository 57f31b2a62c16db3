"""Responses of the lifecycle operations (erase), shared by HTTP, MCP and the CLI."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class ErasedCounts(BaseModel):
    memories: int = Field(description="Memories deleted (content, name, metadata, embedding)")
    relations: int = Field(description="Edges deleted, in and out of the erased memories")
    artifacts: int = Field(description="Artifacts of the subtree, or attached to its memories")
    keys: int = Field(description="API keys limited to namespaces inside the subtree")
    audit_rows_scrubbed: int = Field(
        description="Audit rows that named an erased memory: they keep its id only"
    )


class EraseReceipt(BaseModel):
    """The deletion receipt: what went, when, and the audit row that records it."""

    namespace: str
    erased: ErasedCounts
    erased_at: datetime
    audit_id: uuid.UUID | None = None


class NamespaceRef(BaseModel):
    """One namespace subtree (the path of ``/v1/namespaces/{namespace}``)."""

    namespace: str
