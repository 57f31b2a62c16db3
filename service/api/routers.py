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
    from service.api import tool_results  # POST /v1/tool-results, POST /v1/assemble

    app.include_router(tool_results.router)
    from service.api import audit  # the audit trail (its retention job runs in app.py)

    app.include_router(audit.router)
    from service.api import lifecycle  # DELETE /v1/namespaces/{ns}

    app.include_router(lifecycle.router)
    from service.api import docs  # /docs: Swagger UI from a Python package, no CDN

    docs.install(app)
