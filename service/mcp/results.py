"""Tool results: successes with their ``_meta``, and errors rendered from the error tree.

An error is a tool result with ``isError: true`` (so the model sees it and can correct
itself), whose text and ``structuredContent`` are the HTTP error body with its status:
``{"error": {"code", "message", "status", "field"?, ...}}``. The codes are the error tree's,
the same as over HTTP. Errors carry no ``_meta``: a failed ``remember`` consumes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from service.errors import CtxpackError, InvalidInput
from service.mcp.limits import dumps
from service.remote import RemoteError

log = logging.getLogger("ctxpack.mcp")


def ok(
    payload: dict[str, Any], *, text: str | None = None, meta: dict[str, Any] | None = None
) -> types.CallToolResult:
    """A successful result: ``text`` (default: the payload as compact JSON) for the model,
    the payload as ``structuredContent`` for programs, and ``_meta`` when given."""
    return types.CallToolResult(
        content=[types.TextContent(text=dumps(payload) if text is None else text)],
        structured_content=payload,
        meta=meta,
    )


def failed(status: int, body: dict[str, Any]) -> types.CallToolResult:
    error = {**body, "status": status}
    payload = {"error": error}
    return types.CallToolResult(
        content=[types.TextContent(text=dumps(payload))],
        structured_content=payload,
        is_error=True,
    )


def from_exception(exc: BaseException, tool: str) -> types.CallToolResult:
    """The error result for anything a tool raised. Unexpected errors are logged (type only,
    never their message, which may quote data) and answered as ``internal_error``."""
    if isinstance(exc, CtxpackError):
        log.info("tool_error", extra={"tool": tool, "code": exc.code, "status": exc.status_code})
        return failed(exc.status_code, exc.to_dict())
    if isinstance(exc, RemoteError):
        log.info(
            "tool_error",
            extra={"tool": tool, "code": exc.body.get("code"), "status": exc.status_code},
        )
        return failed(exc.status_code, exc.body)
    log.error("tool_crashed", extra={"tool": tool, "exc_type": type(exc).__name__}, exc_info=exc)
    return failed(500, {"code": "internal_error", "message": "Internal error; see the server log"})


def invalid_arguments(exc: ValidationError) -> InvalidInput:
    """The HTTP API's 422 for bad arguments: the first field named as a dotted path, every
    problem listed, and never the rejected value (it may be a secret)."""
    errors = [
        {
            "field": ".".join(str(part) for part in err.get("loc", ())) or "arguments",
            "message": str(err.get("msg", "invalid value")),
        }
        for err in exc.errors()
    ]
    first = errors[0] if errors else {"field": "arguments", "message": "invalid arguments"}
    return InvalidInput(first["field"], f"{first['field']}: {first['message']}", errors=errors)
