"""The list of feature routers. Each feature adds one line here."""

from __future__ import annotations

from fastapi import FastAPI

from service.config import Settings


def install(app: FastAPI, settings: Settings) -> None:
    from service.api import whoami

    app.include_router(whoami.router)
    from service.api import memories  # remember, remember/batch, /memories

    app.include_router(memories.router)
    from service.api import context  # POST /v1/context

    app.include_router(context.router)
    from service.api import artifacts  # POST /v1/artifacts, GET /v1/artifacts/{id}?fields=

    app.include_router(artifacts.router)
    from service.api import audit  # the audit trail and its retention job

    audit.install(app, settings)
    from service.api import lifecycle  # DELETE /v1/namespaces/{ns}; the expiry job

    lifecycle.install(app, settings)
    from service.mcp import http as mcp_http  # MCP (streamable HTTP) at /mcp, same Bearer keys

    mcp_http.install(app, settings)
    from service.api import limits, metrics  # per-key rate limits; /metrics, request logs

    limits.install(app, settings)
    metrics.install(app, settings)
