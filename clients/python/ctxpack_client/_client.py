"""``Client`` (sync) and ``AsyncClient``: one method per call of the ctxpack API.

The two have the same methods with the same arguments; the async ones are awaited (and
``memories`` / ``audit.iter`` are async iterators). Both are context managers that close
their connection pool; one client is meant to live as long as the program (it is safe to
share between threads, or tasks).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ctxpack_client import errors
from ctxpack_client._core import (
    DEFAULT_BATCH,
    DEFAULT_BODY_BYTES,
    DEFAULT_CHUNK,
    Config,
    answer_wait,
    as_request,
    assemble_body,
    chunks,
    context_request,
    dump,
    failure_wait,
    id_segment,
    merge,
    params,
    parse,
    remember_request,
    tool_result_body,
)
from ctxpack_client.models import (
    ArtifactCreate,
    ArtifactCreated,
    ArtifactDeleted,
    ArtifactFields,
    AssembleRequest,
    AssembleResponse,
    AuditEvent,
    AuditEventSummary,
    AuditPage,
    ContextRequest,
    ContextResponse,
    DeleteResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberManyResult,
    RememberRequest,
    RememberResponse,
    ReplayResponse,
    ToolResultRequest,
    ToolResultResponse,
    WhoAmI,
)

T = TypeVar("T", bound=BaseModel)
def _memory_params(**values: Any) -> dict[str, Any]:
    return params(**values)


class Client:
    """A ctxpack client.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8080`` (default ``CTXPACK_URL``).
        api_key: a ctxpack key (default ``CTXPACK_API_KEY``).
        timeout: seconds per attempt.
        max_retries: extra attempts after 429/503 or a refused connection.
        backoff, max_backoff: the retry waits, in seconds (Retry-After wins when sent).
        http_client: an ``httpx.Client`` to use instead of the client's own (tests, proxies).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.config = Config.build(base_url, api_key, timeout, max_retries, backoff, max_backoff)
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_http = http_client is None
        self._limits: tuple[int, int] | None = None
        self.artifacts = Artifacts(self)
        self.audit = Audit(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __del__(self) -> None:
        # A client dropped without close() (a script, a notebook) still returns its sockets.
        http = getattr(self, "_http", None)
        if getattr(self, "_owns_http", False) and http is not None and not http.is_closed:
            http.close()

    # --- transport ----------------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = self.config.base_url + path
        headers = self.config.headers()
        attempt = 0
        while True:
            try:
                response = self._http.request(method, url, headers=headers, **kwargs)
            except httpx.HTTPError as exc:
                wait = failure_wait(self.config, attempt, exc)
            else:
                answered = answer_wait(self.config, attempt, response)
                if answered is None:
                    return response
                wait = answered
            time.sleep(wait)
            attempt += 1

    def _call(self, method: str, path: str, model: type[T], **kwargs: Any) -> T:
        return parse(self._send(method, path, **kwargs), model)

    # --- calls ----------------------------------------------------------------------------------

    def whoami(self) -> WhoAmI:
        """The key's org, scopes, projects, namespace prefixes and the server's batch limits."""
        return self._call("GET", "/v1/whoami", WhoAmI)

    def remember(
        self, content: str | RememberRequest, namespace: str | None = None, **fields: Any
    ) -> RememberResponse:
        """Store one memory (``fields``: any of RememberRequest's, e.g. ``key``, ``type``,
        ``tags``, ``metadata``). Raises GateRejected (with ``reasons``) when the gate refuses."""
        req = remember_request(content, namespace, fields)
        return self._call("POST", "/v1/remember", RememberResponse, json=dump(req))

    def _batch_limits(self) -> tuple[int, int]:
        if self._limits is None:
            who = self.whoami()
            self._limits = (who.max_batch_items or DEFAULT_BATCH, who.max_body_bytes or DEFAULT_BODY_BYTES)
        return self._limits

    def remember_many(
        self,
        items: Iterable[RememberRequest | dict[str, Any]],
        *,
        chunk_size: int | None = None,
        concurrency: int = 4,
    ) -> RememberManyResult:
        """Store many memories: in chunks of ``chunk_size`` (default 50; never more than the
        server's batch limit, nor its body size), ``concurrency`` chunks at a time. Returns one outcome per item, in input order
        (``created``/``updated``/``duplicate``/``rejected`` with reasons).

        A chunk refused as a whole (invalid item, namespace out of reach) raises its error,
        with ``field`` numbered as in ``items`` and ``partial`` holding what the other chunks
        stored; so does a chunk without an answer (``TransportError``: a timeout, for one)."""
        requests = [as_request(i) for i in items]
        if not requests:
            return RememberManyResult(items=[])
        max_items, max_bytes = self._batch_limits()
        parts = chunks(requests, min(chunk_size or DEFAULT_CHUNK, max_items), max_bytes)

        def send(part: tuple[int, list[RememberRequest]]) -> tuple[int, RememberBatchResponse | errors.CtxpackError]:
            offset, chunk = part
            try:
                body = dump(RememberBatchRequest(items=chunk))
                return offset, self._call("POST", "/v1/remember/batch", RememberBatchResponse, json=body)
            except errors.CtxpackError as exc:
                return offset, exc

        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(parts)))) as pool:
            done = list(pool.map(send, parts))
        return _finish(done)

    def context(self, goal: str | ContextRequest | None, namespace: str | None = None, **fields: Any) -> ContextResponse:
        """A context pack for ``goal`` in ``namespace`` (``fields``: intent, layer, project,
        limit, markdown_token_budget, ...). ``.markdown`` is ready for a prompt."""
        req = context_request(goal, namespace, fields)
        return self._call("POST", "/v1/context", ContextResponse, json=dump(req))

    def wake(self, namespace: str, goal: str | None = None, **fields: Any) -> ContextResponse:
        """The compact, stable session-start pack (``layer="wake"``); the goal is optional."""
        return self.context(goal, namespace, layer="wake", **fields)

    def tool_result(
        self, tool_call_id: str | ToolResultRequest, tool_name: str | None = None, result: Any = None, **fields: Any
    ) -> ToolResultResponse:
        """Pass one tool result through the envelope: redacted, then trimmed to
        ``budget_tokens`` (``fields``: budget_tokens, strategy, fields). ``.message()`` is the
        tool message for the next model call."""
        body = tool_result_body(tool_call_id, tool_name, result, fields)
        return self._call("POST", "/v1/tool-results", ToolResultResponse, json=body)

    def assemble(self, budget_tokens: int | AssembleRequest, **fields: Any) -> AssembleResponse:
        """The messages of one model call within ``budget_tokens`` (``fields``: system,
        user_message, memory={goal, namespace, ...}, task_state, tool_results, messages),
        and the budget report. ``.messages`` is ready for a chat API."""
        return self._call("POST", "/v1/assemble", AssembleResponse, json=assemble_body(budget_tokens, fields))

    def memories(
        self,
        namespace: str | None = None,
        *,
        type: str | None = None,
        project: str | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        key: str | None = None,
        page_size: int = 100,
    ) -> Iterator[MemoryOut]:
        """Every memory matching the filters, newest first, fetched a page at a time.
        ``namespace``: ``u:s`` exactly, ``u:s:*`` the subtree."""
        offset = 0
        while True:
            page = self._call(
                "GET", "/v1/memories", MemoryPage,
                params=_memory_params(namespace=namespace, type=type, project=project,
                                      agent_id=agent_id, tag=tag, key=key,
                                      offset=offset, limit=page_size),
            )
            yield from page.items
            if not page.has_more or not page.items:
                return
            offset += len(page.items)

    def get(self, memory_id: uuid.UUID | str) -> MemoryOut:
        """One memory with its one-hop relations. NotFound when absent or out of reach."""
        return self._call("GET", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", MemoryOut)

    def get_by_key(self, namespace: str, key: str) -> MemoryOut | None:
        """The current memory written under ``key`` in ``namespace``, or None."""
        page = self._call(
            "GET", "/v1/memories", MemoryPage, params=params(namespace=namespace, key=key, limit=1)
        )
        return page.items[0] if page.items else None

    def update(self, memory_id: uuid.UUID | str, **changes: Any) -> MemoryOut:
        """Change fields of a memory (MemoryPatch's); new content is redacted and gated."""
        patch = MemoryPatch(**changes)
        return self._call(
            "PATCH", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", MemoryOut,
            json=patch.model_dump(mode="json", exclude_unset=True),
        )

    def forget(self, memory_id: uuid.UUID | str) -> DeleteResponse:
        """Erase a memory (content, embedding, edges); only a tombstone id stays in the audit."""
        return self._call("DELETE", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", DeleteResponse)


class Artifacts:
    """``client.artifacts``: JSON artifacts, shown in packs as a summary and a pointer."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, namespace: str, name: str, body: dict[str, Any] | list[Any], **fields: Any) -> ArtifactCreated:
        req = ArtifactCreate(namespace=namespace, name=name, body=body, **fields)
        return self._client._call("POST", "/v1/artifacts", ArtifactCreated, json=dump(req))

    def get(self, artifact_id: uuid.UUID | str, fields: Iterable[str] | None = None) -> ArtifactFields:
        query = params(fields=",".join(fields) if fields is not None else None)
        return self._client._call("GET", f"/v1/artifacts/{id_segment(artifact_id, 'artifact_id')}", ArtifactFields, params=query)

    def delete(self, artifact_id: uuid.UUID | str) -> ArtifactDeleted:
        """Erase an artifact: its body and its memory."""
        return self._client._call("DELETE", f"/v1/artifacts/{id_segment(artifact_id, 'artifact_id')}", ArtifactDeleted)


class Audit:
    """``client.audit``: the audit trail (list, one row, replay of a context call)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, **filters: Any) -> AuditPage:
        """One page: filters ``action, key_id, namespace, memory_id, outcome, since, until,
        offset, limit, cursor, full``."""
        return self._client._call("GET", "/v1/audit", AuditPage, params=params(**filters))

    def iter(self, **filters: Any) -> Iterator[AuditEvent | AuditEventSummary]:
        """Every matching row, newest first, following ``next_cursor``."""
        cursor = None
        while True:
            page = self.list(**filters, cursor=cursor)
            yield from page.items
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    def get(self, audit_id: uuid.UUID | str) -> AuditEvent:
        return self._client._call("GET", f"/v1/audit/{id_segment(audit_id, 'audit_id')}", AuditEvent)

    def replay(self, audit_id: uuid.UUID | str) -> ReplayResponse:
        """Run a recorded context call again and diff the packs."""
        return self._client._call("POST", f"/v1/audit/{id_segment(audit_id, 'audit_id')}/replay", ReplayResponse)


def _finish(done: list[tuple[int, RememberBatchResponse | errors.CtxpackError]]) -> RememberManyResult:
    from ctxpack_client._core import shift_error

    ok = [(o, r) for o, r in done if isinstance(r, RememberBatchResponse)]
    failed = [(o, r) for o, r in done if isinstance(r, errors.CtxpackError)]
    result = merge(ok)
    if failed:
        offset, exc = failed[0]
        if isinstance(exc, errors.APIError):
            exc = shift_error(exc, offset)
        exc.partial = result  # type: ignore[attr-defined]
        raise exc
    return result


class AsyncClient:
    """The async twin of ``Client``: same arguments, awaited methods (``memories`` and
    ``audit.iter`` are async iterators)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = Config.build(base_url, api_key, timeout, max_retries, backoff, max_backoff)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None
        self._limits: tuple[int, int] | None = None
        self.artifacts = AsyncArtifacts(self)
        self.audit = AsyncAudit(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = self.config.base_url + path
        headers = self.config.headers()
        attempt = 0
        while True:
            try:
                response = await self._http.request(method, url, headers=headers, **kwargs)
            except httpx.HTTPError as exc:
                wait = failure_wait(self.config, attempt, exc)
            else:
                answered = answer_wait(self.config, attempt, response)
                if answered is None:
                    return response
                wait = answered
            await asyncio.sleep(wait)
            attempt += 1

    async def _call(self, method: str, path: str, model: type[T], **kwargs: Any) -> T:
        return parse(await self._send(method, path, **kwargs), model)

    async def whoami(self) -> WhoAmI:
        return await self._call("GET", "/v1/whoami", WhoAmI)

    async def remember(
        self, content: str | RememberRequest, namespace: str | None = None, **fields: Any
    ) -> RememberResponse:
        req = remember_request(content, namespace, fields)
        return await self._call("POST", "/v1/remember", RememberResponse, json=dump(req))

    async def _batch_limits(self) -> tuple[int, int]:
        if self._limits is None:
            who = await self.whoami()
            self._limits = (who.max_batch_items or DEFAULT_BATCH, who.max_body_bytes or DEFAULT_BODY_BYTES)
        return self._limits

    async def remember_many(
        self,
        items: Iterable[RememberRequest | dict[str, Any]],
        *,
        chunk_size: int | None = None,
        concurrency: int = 4,
    ) -> RememberManyResult:
        """As ``Client.remember_many``, chunks sent concurrently on the event loop."""
        requests = [as_request(i) for i in items]
        if not requests:
            return RememberManyResult(items=[])
        max_items, max_bytes = await self._batch_limits()
        parts = chunks(requests, min(chunk_size or DEFAULT_CHUNK, max_items), max_bytes)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def send(part: tuple[int, list[RememberRequest]]) -> tuple[int, RememberBatchResponse | errors.CtxpackError]:
            offset, chunk = part
            async with gate:
                try:
                    body = dump(RememberBatchRequest(items=chunk))
                    return offset, await self._call("POST", "/v1/remember/batch", RememberBatchResponse, json=body)
                except errors.CtxpackError as exc:
                    return offset, exc

        return _finish(list(await asyncio.gather(*(send(p) for p in parts))))

    async def context(self, goal: str | ContextRequest | None, namespace: str | None = None, **fields: Any) -> ContextResponse:
        req = context_request(goal, namespace, fields)
        return await self._call("POST", "/v1/context", ContextResponse, json=dump(req))

    async def wake(self, namespace: str, goal: str | None = None, **fields: Any) -> ContextResponse:
        return await self.context(goal, namespace, layer="wake", **fields)

    async def tool_result(
        self, tool_call_id: str | ToolResultRequest, tool_name: str | None = None, result: Any = None, **fields: Any
    ) -> ToolResultResponse:
        body = tool_result_body(tool_call_id, tool_name, result, fields)
        return await self._call("POST", "/v1/tool-results", ToolResultResponse, json=body)

    async def assemble(self, budget_tokens: int | AssembleRequest, **fields: Any) -> AssembleResponse:
        return await self._call("POST", "/v1/assemble", AssembleResponse, json=assemble_body(budget_tokens, fields))

    async def memories(
        self,
        namespace: str | None = None,
        *,
        type: str | None = None,
        project: str | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        key: str | None = None,
        page_size: int = 100,
    ) -> AsyncIterator[MemoryOut]:
        offset = 0
        while True:
            page = await self._call(
                "GET", "/v1/memories", MemoryPage,
                params=_memory_params(namespace=namespace, type=type, project=project,
                                      agent_id=agent_id, tag=tag, key=key,
                                      offset=offset, limit=page_size),
            )
            for item in page.items:
                yield item
            if not page.has_more or not page.items:
                return
            offset += len(page.items)

    async def get(self, memory_id: uuid.UUID | str) -> MemoryOut:
        return await self._call("GET", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", MemoryOut)

    async def get_by_key(self, namespace: str, key: str) -> MemoryOut | None:
        page = await self._call(
            "GET", "/v1/memories", MemoryPage, params=params(namespace=namespace, key=key, limit=1)
        )
        return page.items[0] if page.items else None

    async def update(self, memory_id: uuid.UUID | str, **changes: Any) -> MemoryOut:
        patch = MemoryPatch(**changes)
        return await self._call(
            "PATCH", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", MemoryOut,
            json=patch.model_dump(mode="json", exclude_unset=True),
        )

    async def forget(self, memory_id: uuid.UUID | str) -> DeleteResponse:
        return await self._call("DELETE", f"/v1/memories/{id_segment(memory_id, 'memory_id')}", DeleteResponse)


class AsyncArtifacts:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, namespace: str, name: str, body: dict[str, Any] | list[Any], **fields: Any) -> ArtifactCreated:
        req = ArtifactCreate(namespace=namespace, name=name, body=body, **fields)
        return await self._client._call("POST", "/v1/artifacts", ArtifactCreated, json=dump(req))

    async def get(self, artifact_id: uuid.UUID | str, fields: Iterable[str] | None = None) -> ArtifactFields:
        query = params(fields=",".join(fields) if fields is not None else None)
        return await self._client._call("GET", f"/v1/artifacts/{id_segment(artifact_id, 'artifact_id')}", ArtifactFields, params=query)

    async def delete(self, artifact_id: uuid.UUID | str) -> ArtifactDeleted:
        return await self._client._call("DELETE", f"/v1/artifacts/{id_segment(artifact_id, 'artifact_id')}", ArtifactDeleted)


class AsyncAudit:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self, **filters: Any) -> AuditPage:
        return await self._client._call("GET", "/v1/audit", AuditPage, params=params(**filters))

    async def iter(self, **filters: Any) -> AsyncIterator[AuditEvent | AuditEventSummary]:
        cursor = None
        while True:
            page = await self.list(**filters, cursor=cursor)
            for item in page.items:
                yield item
            if not page.has_more or not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get(self, audit_id: uuid.UUID | str) -> AuditEvent:
        return await self._client._call("GET", f"/v1/audit/{id_segment(audit_id, 'audit_id')}", AuditEvent)

    async def replay(self, audit_id: uuid.UUID | str) -> ReplayResponse:
        return await self._client._call("POST", f"/v1/audit/{id_segment(audit_id, 'audit_id')}/replay", ReplayResponse)


__all__ = ["AsyncClient", "Client"]
