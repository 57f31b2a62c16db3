"""One HTTP client of a ctxpack server, for the faces that forward to one: the MCP server's
remote backend (``ctxpack mcp --url``, mcp/backends.py:RemoteBackend) and ingest's HTTP
target (``ctxpack ingest --url``, lifecycle/ingest.py:HttpTarget).

``CtxpackHttp`` holds one connection pool for the process, presents the key as a Bearer
token, and turns what goes wrong into the error tree's terms: a server it cannot reach is
``ServiceUnavailable``; an answer of 400 or more is a ``RemoteError`` carrying the server's
``error`` body (its stable code, message and field), so a face answers it as the server
did. The client package (clients/python) is the same idea for applications, outside the
service.

``api_key_from_env`` reads the key from ``CTXPACK_API_KEY``, the one name of the key for every
command that presents one (``ctxpack mcp``, ``ctxpack ingest --url``, the benchmarks, the client
package); the older ``CTXPACK_KEY`` is still taken, with a warning.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from service.errors import ServiceUnavailable

M = TypeVar("M", bound=BaseModel)

KEY_ENV = "CTXPACK_API_KEY"
LEGACY_KEY_ENV = "CTXPACK_KEY"


def api_key_from_env() -> str | None:
    """The key from ``CTXPACK_API_KEY``; the older ``CTXPACK_KEY`` is still taken, with a
    warning on stderr. None when neither is set (or both are blank)."""
    key = os.environ.get(KEY_ENV, "").strip()
    if key:
        return key
    legacy = os.environ.get(LEGACY_KEY_ENV, "").strip()
    if legacy:
        sys.stderr.write(f"warning: {LEGACY_KEY_ENV} is deprecated; set {KEY_ENV} instead\n")
    return legacy or None


class RemoteError(Exception):
    """An error answered by a remote ctxpack: its HTTP status and its ``error`` body, whose
    ``code`` is one of the error tree's."""

    def __init__(self, status_code: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", "remote error"))
        self.status_code = status_code
        self.body = body


def error_body(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of a refusal, or one made up from the status when the answer has
    none (a proxy's page, a crash): ``unavailable`` for 5xx, ``http_error`` otherwise."""
    try:
        body = response.json()["error"]
        if not isinstance(body, dict) or "code" not in body:
            raise ValueError
        return body
    except (ValueError, KeyError, TypeError):
        return {
            "code": "unavailable" if response.status_code >= 500 else "http_error",
            "message": f"ctxpack answered HTTP {response.status_code}",
        }


class CtxpackHttp:
    """A ctxpack's HTTP API at ``url`` with ``key``: one client per process, reused for
    every call (``agent`` names the face in the User-Agent)."""

    def __init__(
        self, url: str, key: str, *, agent: str, timeout: float, transport: Any = None
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}", "User-Agent": agent},
            timeout=timeout,
            transport=transport,
        )

    @property
    def base_url(self) -> httpx.URL:
        return self.http.base_url

    async def send(
        self, method: str, path: str, *, json: Any = None, params: Any = None
    ) -> httpx.Response:
        """One request, its answer whatever its status.

        Raises:
            ServiceUnavailable: the server could not be reached (or did not answer in time).
        """
        try:
            return await self.http.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(
                f"cannot reach ctxpack at {self.base_url}: {type(exc).__name__}"
            ) from exc

    async def call(
        self, method: str, path: str, model: type[M], *, json: Any = None, params: Any = None
    ) -> M:
        """One request, its answer as ``model``.

        Raises:
            ServiceUnavailable: the server could not be reached.
            RemoteError: the server answered 400 or more (its error body).
        """
        response = await self.send(method, path, json=json, params=params)
        if response.status_code >= 400:
            raise RemoteError(response.status_code, error_body(response))
        return model.model_validate(response.json())

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> CtxpackHttp:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
