"""Request and response models of the artifact endpoints (shared by HTTP and MCP)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.schemas.common import finite_json
from service.schemas.namespaces import namespace_field

SLUG = r"^[A-Za-z0-9_.\-]{1,128}$"


class ArtifactCreate(BaseModel):
    """A JSON artifact to keep out of prompts: packs show its summary and a reference, and
    readers fetch only the fields they declare."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(max_length=200, description="`user[:session[:task]]`")
    name: str = Field(min_length=1, max_length=300, description="Short title")
    body: Any = Field(
        description="The artifact: a JSON object or list",
        json_schema_extra={"anyOf": [{"type": "object"}, {"type": "array"}]},
    )
    project: str | None = Field(None, pattern=SLUG, description="Project id")
    summary: str | None = Field(
        None,
        max_length=2000,
        description="What the artifact holds, for a model to reason about; derived from its "
        "shape when absent.",
    )

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return namespace_field(value)

    @field_validator("body")
    @classmethod
    def _body(cls, value: Any) -> dict[str, Any] | list[Any]:
        if not isinstance(value, dict | list):
            raise ValueError("body must be a JSON object or list")
        return finite_json(value)  # type: ignore[no-any-return]

    @field_validator("name", "summary")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()


class ArtifactCreated(BaseModel):
    artifact_id: uuid.UUID
    memory_id: uuid.UUID = Field(description="The artifact memory that packs show")
    namespace: str
    name: str
    summary: str
    size_bytes: int = Field(description="Size of the body as compact JSON, in UTF-8 bytes")
    schema_keys: list[str] = Field(
        description="Top-level keys (of the object, or of the list's object items)"
    )
    redactions: int = Field(0, description="Secrets and PII values redacted before storing")
    audit_id: uuid.UUID | None = None


class ArtifactFields(BaseModel):
    artifact_id: uuid.UUID
    namespace: str
    name: str
    summary: str
    size_bytes: int
    schema_keys: list[str]
    project: str | None
    created_at: datetime
    fields: dict[str, Any] = Field(
        description="The declared fields found: from the object, or, per field, from the "
        "first list item that has it"
    )
    missing: list[str] = Field(description="Declared fields the artifact does not have")
    body: dict[str, Any] | list[Any] | None = Field(
        None, description="The whole body, only when no fields were declared"
    )


class ArtifactDeleted(BaseModel):
    """An erased artifact: its body and its memory are gone; only ids remain in the trail."""

    artifact_id: uuid.UUID
    memory_id: uuid.UUID | None
    deleted: bool
    audit_id: uuid.UUID | None = None


class ArtifactRef(BaseModel):
    """One artifact, by id (the path of ``/v1/artifacts/{artifact_id}``)."""

    artifact_id: uuid.UUID


class ArtifactQuery(BaseModel):
    """An artifact and the fields to read (GET /v1/artifacts/{artifact_id}): ``fields`` is
    comma-separated, ``namespace`` the caller's (the artifact must live there or above)."""

    artifact_id: uuid.UUID
    fields: str | None = None
    namespace: str | None = None
