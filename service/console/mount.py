"""Mount the console on the app: the router at /ui, the static files at /ui/static, and the
console's security headers."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.config import Settings
from service.console import pages, security


def install(app: FastAPI, settings: Settings) -> None:
    """Serve the console at /ui, its static files at /ui/static, and its headers."""
    app.include_router(pages.router)
    app.mount(
        "/ui/static", StaticFiles(directory=str(Path(__file__).parent / "static")), name="ui-static"
    )
    app.add_middleware(security.SecurityHeaders)
