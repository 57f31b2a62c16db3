"""Schemas shared by several endpoints."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable error code")
    message: str
    field: str | None = Field(None, description="The offending field, as a dotted path")


class ErrorResponse(BaseModel):
    error: ErrorBody


class Page(BaseModel):
    """Paging block of list responses."""

    offset: int
    limit: int
    total: int
    has_more: bool


class WhoAmI(BaseModel):
    org_id: str
    key_id: str
    key_name: str
    scopes: list[str]
    projects: list[str]
    namespace_prefixes: list[str]
    max_batch_items: int | None = Field(
        None, description="Most items one POST /v1/remember/batch accepts (clients chunk by it)"
    )
    max_body_bytes: int | None = Field(None, description="Largest request body accepted, in bytes")
