"""Per-key rate limits, and the request limits every /v1 operation documents.

Rate limits. A token bucket per API key: it holds at most ``rate_limit_burst`` tokens and
refills at ``rate_limit_per_minute / 60`` tokens a second; each authenticated call (HTTP or
MCP) takes one. A call that finds the bucket empty is refused with 429 ``rate_limited`` and a
``Retry-After`` header (whole seconds until a token is back), and leaves an audit row of
action ``rate_limited``, outcome ``refused``. The check runs right after authentication, so
a refused call does no other work. ``rate_limit_per_minute = 0`` turns the limiter off.

The buckets live in the process: with several server processes each enforces the rate on
its own share of the traffic. A full bucket is the same as no bucket, so full buckets are
dropped when the table grows, which bounds its memory by the keys active in the last
``burst / rate`` seconds.

Request size. ``RequestGuard`` (service/app.py) refuses bodies over ``max_body_bytes`` with
413 before any work; fields have their own bounds in the schemas (422).

Request text. ``JsonGuard`` refuses, with 422 naming the field and before any work, what no
endpoint can store or should parse: a body that is not UTF-8 (RFC 8259); a NUL character or
a lone UTF-16 surrogate anywhere in a JSON body or a query parameter (Postgres text and
jsonb reject NUL; UTF-8 has no surrogates); JSON nested deeper than ``MAX_JSON_DEPTH``
(Python's parser would recurse until it fails, which FastAPI answers with a 400). Bodies
are checked with C-speed scans first and parsed only when those find something; a typical
call pays a few microseconds. The MCP stdio transport has no HTTP in front of it, so the
schemas and domain keep their own checks; this guard covers every HTTP endpoint at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import metrics
from service.api.metrics import route_template
from service.config import Settings
from service.domain import audit as audit_service
from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.errors import RateLimited

log = logging.getLogger("ctxpack.limits")

EXTRA = "rate_limiter"
"""The key of the limiter in ``AppState.extras``, where ``get_caller`` and /mcp look for it."""


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Token buckets, one per key id.

    Args:
        per_minute: sustained calls a key may make per minute (> 0).
        burst: the bucket's size: calls a key may make at once after being idle.
        sessionmaker: where refused calls' audit rows are written.
        clock: monotonic seconds (tests pass a fake one).
        max_buckets: above this many buckets, full ones are dropped.
    """

    def __init__(
        self,
        per_minute: int,
        burst: int,
        sessionmaker: async_sessionmaker[AsyncSession] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_buckets: int = 10_000,
    ) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = float(max(burst, 1))
        self.sessionmaker = sessionmaker
        self.clock = clock
        self.max_buckets = max_buckets
        self._buckets: dict[uuid.UUID, _Bucket] = {}

    def take(self, key_id: uuid.UUID) -> float:
        """Take a token for ``key_id``. Returns 0 when the call may go ahead, else the
        seconds until a token is back (nothing is taken then)."""
        now = self.clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            if len(self._buckets) >= self.max_buckets:
                self._drop_full(now)
            bucket = self._buckets[key_id] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def _drop_full(self, now: float) -> None:
        full = [
            k
            for k, b in self._buckets.items()
            if b.tokens + (now - b.stamp) * self.rate >= self.capacity
        ]
        for k in full:
            del self._buckets[k]

    async def check(self, request: Request, caller: Caller) -> None:
        """Let the call through, or refuse it.

        Raises:
            RateLimited: the key's bucket is empty; ``retry_after`` is in whole seconds.
        """
        wait = self.take(caller.key_id)
        if wait <= 0:
            return
        retry_after = max(1, math.ceil(wait))
        metrics.RATE_LIMITED.inc()
        await self._audit(request, caller, retry_after)
        raise RateLimited(
            f"Rate limit exceeded: this key may make {self.per_minute} calls a minute; "
            f"retry in {retry_after} s",
            retry_after=retry_after,
        )

    async def _audit(self, request: Request, caller: Caller, retry_after: int) -> None:
        if self.sessionmaker is None:
            return
        ctx = AuditContext(action="rate_limited", caller=caller)
        started = request.scope.get("state", {}).get("started")
        if started is not None:
            ctx.started = started
        ctx.request = {"method": request.method, "route": route_template(request.scope)}
        try:
            async with self.sessionmaker() as session:
                await audit_service.record(
                    session,
                    ctx,
                    outcome="refused",
                    status_code=429,
                    details={"error_code": "rate_limited", "retry_after": retry_after},
                )
                await session.commit()
        except Exception:  # the refusal matters more than its audit row
            log.exception("audit_write_failed", extra={"action": ctx.action})


@contextlib.asynccontextmanager
async def run_rate_limiter(app: FastAPI, state: Any) -> AsyncIterator[None]:
    """Lifespan hook: put the limiter where ``get_caller`` and /mcp find it."""
    settings: Settings = state.settings
    if settings.rate_limit_per_minute > 0:
        state.extras[EXTRA] = RateLimiter(
            settings.rate_limit_per_minute, settings.rate_limit_burst, state.sessionmaker
        )
    try:
        yield
    finally:
        state.extras.pop(EXTRA, None)


# --- request text ---------------------------------------------------------------------------

MAX_JSON_DEPTH = 32
"""Deepest JSON accepted in any body: metadata's own limit (8) inside a batch or an MCP
envelope is about 12."""

_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.DOTALL)
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _text_problem(text: str) -> str | None:
    found = _BAD_TEXT.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "NUL characters are not allowed in text"
    return "lone surrogate code points (\\ud800-\\udfff) are not valid text"


def _too_deep(body: bytes, max_depth: int) -> tuple[str, str] | None:
    """The path at which ``body`` nests deeper than ``max_depth``, found without parsing
    (so without recursion): a scan over its strings, brackets, colons and commas."""
    # Each open container: [is_object, label (key or index), expecting_key, last string].
    stack: list[list[Any]] = []
    for token in _TOKENS.finditer(body):
        raw = token.group()
        top = stack[-1] if stack else None
        if raw[:1] == b'"':
            if top is not None and top[0] and top[2]:
                top[3] = raw
        elif raw in (b"{", b"["):
            stack.append([raw == b"{", None if raw == b"{" else 0, True, b'""'])
            if len(stack) > max_depth:
                labels = [str(f[1]) for f in stack[:-1] if f[1] is not None]
                return ".".join(labels) or "body", f"JSON nests deeper than {max_depth} levels"
        elif raw in (b"}", b"]"):
            if stack:
                stack.pop()
        elif top is not None and raw == b":" and top[0]:
            try:
                top[1] = json.loads(top[3])
            except ValueError:
                top[1] = "?"
            top[2] = False
        elif top is not None and raw == b",":
            if top[0]:
                top[2] = True
            else:
                top[1] += 1
    return None


def _bad_text_in(value: Any) -> tuple[str, str] | None:
    """The path of the first string (key or value) in ``value`` that Postgres cannot
    store, walking without recursion."""
    todo: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem:
                return ".".join(path) or "body", problem
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = _text_problem(key)
                if problem:
                    return ".".join((*path, key.encode("utf-8", "replace").decode())), problem
                todo.append(((*path, key), child))
        elif isinstance(item, list):
            todo.extend(((*path, str(i)), child) for i, child in enumerate(item))
    return None


def json_body_problem(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> tuple[str, str] | None:
    """``(field, message)`` for a JSON body no endpoint may accept (not UTF-8, too deep,
    NUL or a lone surrogate in a string), else None (malformed JSON is left to the
    endpoint, which answers it)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "body", f"the body is not UTF-8 (byte {exc.start})"
    if body.count(b"[") + body.count(b"{") > max_depth:
        problem = _too_deep(body, max_depth)
        if problem is not None:
            return problem
    if _SUSPECT_ESCAPE.search(body) is None:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return _bad_text_in(value)


def query_problem(query_string: bytes) -> tuple[str, str] | None:
    """``(parameter, message)`` for a query parameter holding a NUL, else None."""
    if b"%00" not in query_string:
        return None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        problem = _text_problem(name) or _text_problem(value)
        if problem:
            return (name if "\x00" not in name else "query"), problem
    return None


class JsonGuard:
    """Pure ASGI middleware, inside ``RequestGuard`` (which bounds the body it reads): 422
    for NUL, lone surrogates and over-deep nesting, before the app sees the request."""

    def __init__(self, app: ASGIApp, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = query_problem(scope.get("query_string") or b"")
        if problem is None and scope.get("method") in _BODY_METHODS and _is_json(scope):
            body, receive = await _buffered(receive)
            problem = json_body_problem(body, self.max_depth)
        if problem is None:
            await self.app(scope, receive, send)
            return
        from service.api.errors import error_response

        field, message = problem
        response = error_response(
            422, {"code": "validation_error", "message": f"{field}: {message}", "field": field}
        )
        await response(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or []:
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # FastAPI parses a body without a content type as JSON


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """Read the whole body; return it and a ``receive`` that replays it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def _document_limits(app: FastAPI) -> None:
    """Add the answers every /v1 operation may give to the OpenAPI schema: 429 (this
    module), 413 for operations with a body (RequestGuard)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        from service.schemas.common import ErrorBody, ErrorResponse

        components = schema.setdefault("components", {}).setdefault("schemas", {})
        ref = "#/components/schemas/{model}"
        components.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template=ref))
        components.setdefault("ErrorResponse", ErrorResponse.model_json_schema(ref_template=ref))
        for path, operations in schema.get("paths", {}).items():
            if not path.startswith("/v1/"):
                continue
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.setdefault(
                    "429",
                    {
                        "description": "Rate limited: the key exceeded its calls per minute "
                        "(see the Retry-After header)",
                        "content": {"application/json": {"schema": _ERROR_REF}},
                    },
                )
                if "requestBody" in operation:
                    responses.setdefault(
                        "413",
                        {
                            "description": "The request body is larger than max_body_bytes",
                            "content": {"application/json": {"schema": _ERROR_REF}},
                        },
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI, settings: Settings) -> None:
    """Register the limiter's lifespan hook, guard request text and document the limits
    (called from ``routers``)."""
    app.state.lifespan_hooks.append(run_rate_limiter)
    # Appended, so innermost: inside RequestGuard, which bounds the body JsonGuard buffers.
    app.user_middleware.append(Middleware(JsonGuard))
    _document_limits(app)
