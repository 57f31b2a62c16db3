"""The web console at /ui: see and curate what agents remembered.

Server-rendered (Jinja2 templates and static files inside this package; no Node build, no
CDN; one small script of our own, and every page works without it). A person signs in by
pasting an API key once; the browser then holds only a session cookie (see
``service.domain.console``). Every action goes through ``calls.py``, the same domain calls,
scopes, rate limit, unit of work and audit rows as the HTTP API.

    calls.py     the one adapter into the domain (switch it to the call runner at merge)
    pages.py     the page handlers (thin: parse, call, render)
    security.py  CSP and other headers, the session cookie, CSRF
    charts.py    server-side SVG charts
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.config import Settings


def install(app: FastAPI, settings: Settings) -> None:
    """Serve the console at /ui, its static files at /ui/static, and its headers."""
    from service.console import pages, security

    app.include_router(pages.router)
    app.mount(
        "/ui/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="ui-static"
    )
    app.add_middleware(security.SecurityHeaders)
