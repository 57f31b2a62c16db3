"""Render every error as ``{"error": {"code", "message", ...}}``; never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.calls import failure_of
from service.errors import CtxpackError

log = logging.getLogger("ctxpack.api")

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _malformed_json(err: dict[str, Any]) -> dict[str, str]:
    """A body that is not JSON: FastAPI puts the parser's character offset where a field
    name goes (``loc = ("body", 5)``), which read as a field named ``5``."""
    loc = tuple(err.get("loc", ()))
    at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    reason = (err.get("ctx") or {}).get("error")
    detail = f": {reason}" if isinstance(reason, str) and reason else ""
    return {"field": "body", "message": f"the body is not valid JSON{at}{detail}"}


def _safe_input_message(err: dict[str, Any]) -> str:
    # pydantic messages can quote the input; keep only the message, never the value.
    return str(err.get("msg", "invalid value"))


async def _audit_failure(request: Request, status: int, code: str, details: dict[str, Any]) -> None:
    """Have the call runner write the failed call's row, if the call got as far as opening
    its audit context (an authenticated caller)."""
    ctx = getattr(request.state, "audit", None)
    resources = getattr(request.app.state, "ctx", None)
    if ctx is None or resources is None:
        return
    await resources.runner.record_failure(ctx, status, code, details)


def error_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CtxpackError)
    async def ctxpack_error(request: Request, exc: CtxpackError) -> JSONResponse:
        status, code, details = failure_of(exc)
        await _audit_failure(request, status, code, details)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        if exc.status_code == 429 and "retry_after" in exc.details:
            headers = {"Retry-After": str(exc.details["retry_after"])}
        return error_response(exc.status_code, exc.to_dict(), headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            _malformed_json(e)
            if e.get("type") == "json_invalid"
            else {"field": _field(tuple(e.get("loc", ()))), "message": _safe_input_message(e)}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "body", "message": "invalid request"}
        await _audit_failure(request, 422, "validation_error", {"field": first["field"]})
        return error_response(
            422,
            {
                "code": "validation_error",
                "message": f"{first['field']}: {first['message']}",
                "field": first["field"],
                "errors": errors,
            },
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else code
        return error_response(exc.status_code, {"code": code, "message": message})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "unhandled_error",
            extra={"path": request.url.path, "exc_type": type(exc).__name__},
        )
        await _audit_failure(request, 500, "internal_error", {})
        return error_response(
            500, {"code": "internal_error", "message": "Internal error; see the server log"}
        )
