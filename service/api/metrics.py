"""Observability of every HTTP call: a request id, one JSON log line, Prometheus counts.

``RequestObserver`` wraps the whole app (outside the body-size guard, so a 413 is seen too).
For each request it:

- takes the caller's ``X-Request-ID`` when it is a plain token (``[A-Za-z0-9._-]{1,64}``),
  else makes one, and returns it in the ``X-Request-ID`` response header;
- counts the request and its latency by method and route *template*
  (``/v1/memories/{memory_id}``), never the raw path, so ids do not explode the label set;
- logs one ``request`` record: request id, method, route, status, latency, and the caller's
  org and key ids once authenticated. Never a body, a query string, a header value or a key.

``GET /metrics`` serves the registry of ``service.metrics`` in Prometheus text format when
``metrics_enabled``. It needs no key: it holds counts by route, status, reason code and
redaction label only (no org, key, namespace or content), and the server binds 127.0.0.1 by
default. A deployment that exposes the port should turn it off or filter /metrics at its
proxy.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import metrics
from service.config import Settings

log = logging.getLogger("ctxpack.http")

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._\-]{1,64}")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Probes and scrapes are logged at DEBUG: a poller would otherwise drown the log.
_QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})


def route_template(scope: Scope) -> str:
    """The matched route's path template (``/v1/memories/{memory_id}``), or ``unmatched``:
    never a raw path with ids in it."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    # Starlette routes (/mcp) and requests refused before routing (413) carry no "route".
    router = getattr(scope.get("app"), "router", None)
    for candidate in getattr(router, "routes", ()):
        match, _ = candidate.matches(scope)
        if match is Match.FULL:
            return str(getattr(candidate, "path", "unmatched"))
    return "unmatched"


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers") or []:
        if name == b"x-request-id":
            given = str(value.decode("latin-1"))
            if _REQUEST_ID.fullmatch(given):
                return given
            break
    return uuid.uuid4().hex


class RequestObserver:
    """Pure ASGI middleware: request id, metrics and one log record per HTTP request."""

    def __init__(self, app: ASGIApp, count: bool = True) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _request_id(scope)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 500

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message).append(REQUEST_ID_HEADER, request_id)
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            self._observe(scope, status, time.perf_counter() - started, request_id)

    def _observe(self, scope: Scope, status: int, elapsed: float, request_id: str) -> None:
        method = scope.get("method", "GET")
        method = method if method in _METHODS else "OTHER"
        route = route_template(scope)
        if self.count:
            metrics.HTTP_REQUESTS.labels(method=method, route=route, status=str(status)).inc()
            metrics.HTTP_LATENCY.labels(method=method, route=route).observe(elapsed)
        caller = scope.get("state", {}).get("caller")
        level = (
            logging.ERROR
            if status >= 500
            else logging.DEBUG
            if route in _QUIET_ROUTES and status < 400
            else logging.INFO
        )
        if not log.isEnabledFor(level):
            return
        log.log(
            level,
            "request",
            extra={
                "request_id": request_id,
                "method": method,
                "route": route,
                "status": status,
                "latency_ms": round(elapsed * 1000, 3),
                "org_id": str(caller.org_id) if caller is not None else None,
                "key_id": str(caller.key_id) if caller is not None else None,
            },
        )


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus metrics of this process, in the text exposition format."""
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)


def install(app: FastAPI, settings: Settings) -> None:
    """Wrap the app in ``RequestObserver`` and serve /metrics when enabled (from ``routers``)."""
    if settings.metrics_enabled:
        app.add_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)
    app.add_middleware(RequestObserver, count=settings.metrics_enabled)
