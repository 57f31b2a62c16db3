"""What Client and AsyncClient share: settings, request bodies, answers, the retry policy."""

from __future__ import annotations

import json
import os
import random
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ctxpack_client import errors
from ctxpack_client.models import (
    AssembleRequest,
    ContextRequest,
    RememberBatchResponse,
    RememberManyResult,
    RememberRequest,
    ToolResultRequest,
)

T = TypeVar("T", bound=BaseModel)

DEFAULT_URL = "http://127.0.0.1:8080"
RETRY_STATUSES = frozenset({429, 503})
DEFAULT_BATCH = 500
# Items per remember_many chunk unless told. Not for speed (on a loaded 2-core machine the
# model bounds throughput whatever the chunking: docs/python-client.md, "Measured"), but so an
# invalid item refuses 50 items rather than 500, and a retried 429/503 re-sends less.
DEFAULT_CHUNK = 50
DEFAULT_BODY_BYTES = 4 * 1024 * 1024
_ITEM_FIELD = re.compile(r"^items\.(\d+)(.*)$")


@dataclass(frozen=True)
class Config:
    """Where the server is, the key, and how patient to be.

    ``base_url`` and ``api_key`` default to ``CTXPACK_URL`` and ``CTXPACK_API_KEY``.
    ``timeout``: seconds per attempt (connect, read, write, pool). ``max_retries``: extra
    attempts after a 429 or 503 answer or a refused connection; the wait is the server's
    Retry-After when it sends one, else ``backoff * 2**attempt`` with jitter, never more than
    ``max_backoff``."""

    base_url: str
    api_key: str | None
    timeout: float
    max_retries: int
    backoff: float
    max_backoff: float

    @classmethod
    def build(
        cls,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
    ) -> Config:
        url = base_url or os.environ.get("CTXPACK_URL") or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get("CTXPACK_API_KEY")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        return cls(url.rstrip("/"), key or None, timeout, max_retries, backoff, max_backoff)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "ctxpack-client/0.1"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers



def id_segment(value: uuid.UUID | str, field: str) -> str:
    """An id as a URL path segment: a UUID, or a ``ValidationError`` naming ``field`` before
    any request (``forget("../namespaces/x")`` must never reach another endpoint)."""
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        raise errors.ValidationError(
            f"{field} must be a UUID, got {str(value)[:40]!r}", field=field
        ) from None

def retry_delay(config: Config, attempt: int, response: httpx.Response | None) -> float:
    """Seconds to wait before attempt ``attempt + 1``: Retry-After if the server said, else
    exponential backoff with jitter; capped at ``max_backoff``."""
    if response is not None:
        value = response.headers.get("retry-after")
        if value:
            try:
                return min(config.max_backoff, max(0.0, float(value)))
            except ValueError:
                try:
                    when = parsedate_to_datetime(value)
                    return min(config.max_backoff, max(0.0, (when - datetime.now(UTC)).total_seconds()))
                except (TypeError, ValueError):
                    pass
    base = float(config.backoff * (2**attempt))
    return min(config.max_backoff, base * (0.5 + random.random() / 2))


def answer_wait(config: Config, attempt: int, response: httpx.Response) -> float | None:
    """Seconds to wait before trying again after ``response``; None: hand it back as is."""
    if response.status_code not in RETRY_STATUSES or attempt >= config.max_retries:
        return None
    return retry_delay(config, attempt, response)


def failure_wait(config: Config, attempt: int, exc: httpx.HTTPError) -> float:
    """Seconds to wait before trying again after no answer. Only a refused connection is
    retried (the request never left); a timeout may have been a write that happened."""
    if isinstance(exc, httpx.ConnectError) and attempt < config.max_retries:
        return retry_delay(config, attempt, None)
    if isinstance(exc, httpx.ConnectError):
        raise errors.TransportError(f"cannot reach {config.base_url}: {exc}") from exc
    if isinstance(exc, httpx.TimeoutException):
        raise errors.TransportError(f"no answer from {config.base_url} in time: {exc}") from exc
    raise errors.TransportError(str(exc)) from exc


def remember_request(
    content: str | RememberRequest, namespace: str | None, fields: dict[str, Any]
) -> RememberRequest:
    if isinstance(content, RememberRequest):
        return content
    return RememberRequest(content=content, namespace=namespace, **fields)


def context_request(
    goal: str | ContextRequest | None, namespace: str | None, fields: dict[str, Any]
) -> ContextRequest:
    if isinstance(goal, ContextRequest):
        return goal
    return ContextRequest(goal=goal, namespace=namespace, **fields)


def parse(response: httpx.Response, model: type[T]) -> T:
    """The answer as ``model``, or the error class of its code."""
    raise_for_error(response)
    return model.model_validate(response.json())


def raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        payload = response.json()
    except ValueError:
        payload = None
    raise errors.from_response(response.status_code, payload, dict(response.headers))


def dump(model: BaseModel) -> dict[str, Any]:
    """A request body: JSON-ready, without the fields left at None."""
    return model.model_dump(mode="json", exclude_none=True)


def _finite(value: Any) -> Any:
    """NaN and the infinities as the strings the server renders them as (JSON has none)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _tool_result_json(req: ToolResultRequest) -> dict[str, Any]:
    body = req.model_dump(mode="json", exclude_none=True, exclude={"result"})
    body["result"] = _finite(req.result)  # kept when None: a tool may answer null
    return body


def tool_result_body(
    tool_call_id: str | ToolResultRequest, tool_name: str | None, result: Any, fields: dict[str, Any]
) -> dict[str, Any]:
    """The body of POST /v1/tool-results."""
    if isinstance(tool_call_id, ToolResultRequest):
        return _tool_result_json(tool_call_id)
    if tool_name is None:
        raise ValueError("tool_name is required")
    return _tool_result_json(
        ToolResultRequest(tool_call_id=tool_call_id, tool_name=tool_name, result=result, **fields)
    )


def assemble_body(budget_tokens: int | AssembleRequest, fields: dict[str, Any]) -> dict[str, Any]:
    """The body of POST /v1/assemble (tool results as ``ToolResultRequest`` or dicts)."""
    req = (
        budget_tokens
        if isinstance(budget_tokens, AssembleRequest)
        else AssembleRequest(budget_tokens=budget_tokens, **fields)
    )
    body = req.model_dump(mode="json", exclude_none=True, exclude={"tool_results"})
    body["tool_results"] = [_tool_result_json(r) for r in req.tool_results]
    return body


def params(**values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, (uuid.UUID, datetime)):
            out[name] = value.isoformat() if isinstance(value, datetime) else str(value)
        else:
            out[name] = value
    return out


def as_request(item: RememberRequest | dict[str, Any]) -> RememberRequest:
    return item if isinstance(item, RememberRequest) else RememberRequest.model_validate(item)


def chunks(
    items: list[RememberRequest], max_items: int, max_bytes: int
) -> list[tuple[int, list[RememberRequest]]]:
    """``(offset, chunk)`` pairs: at most ``max_items`` per chunk, and, as JSON, under 90% of
    ``max_bytes`` (one oversized item still goes alone, for the server to judge)."""
    out: list[tuple[int, list[RememberRequest]]] = []
    budget = int(max_bytes * 0.9)
    start, size, current = 0, 0, []  # type: ignore[var-annotated]
    for index, item in enumerate(items):
        item_bytes = len(json.dumps(dump(item)).encode()) + 1
        if current and (len(current) >= max_items or size + item_bytes > budget):
            out.append((start, current))
            start, size, current = index, 0, []
        current.append(item)
        size += item_bytes
    if current:
        out.append((start, current))
    return out


def shift_error(exc: errors.APIError, offset: int) -> errors.APIError:
    """A chunk's error, with ``items.N`` in its field renumbered to the caller's input."""
    if exc.field:
        match = _ITEM_FIELD.match(exc.field)
        if match:
            exc.field = f"items.{int(match.group(1)) + offset}{match.group(2)}"
            exc.body["field"] = exc.field
    return exc


def merge(results: list[tuple[int, RememberBatchResponse]]) -> RememberManyResult:
    out = RememberManyResult(items=[])
    for offset, response in sorted(results, key=lambda r: r[0]):
        for item in response.items:
            out.items.append(item.model_copy(update={"index": item.index + offset}))
        out.created += response.created
        out.updated += response.updated
        out.duplicates += response.duplicates
        out.rejected += response.rejected
        if response.audit_id:
            out.audit_ids.append(response.audit_id)
    return out
