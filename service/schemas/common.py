"""Schemas shared by several endpoints."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field


def non_finite_path(value: Any) -> str | None:
    """The dotted path of the first non-finite number (NaN, Infinity, -Infinity, or a literal
    such as ``1e400`` that parses to infinity) in a JSON value, or None. JSON (RFC 8259) has
    no such numbers and Postgres's jsonb refuses them, so every JSON field the service stores
    is checked with this before anything is written. Iterative: no recursion limit."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "."
        if isinstance(item, dict):
            todo.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            todo.extend((f"{path}.{i}" if path else str(i), v) for i, v in enumerate(item))
    return None


def finite_json(value: Any) -> Any:
    """A field validator's body: ``value`` unchanged, or ValueError naming where it holds a
    non-finite number (a 422 naming the field, never a 500 from the database)."""
    where = non_finite_path(value)
    if where is not None:
        raise ValueError(
            f"non-finite number (NaN or Infinity) at {where!r}: JSON numbers must be finite"
        )
    return value


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
