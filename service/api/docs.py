"""/docs: Swagger UI served from the ``fastapi-offline`` Python package's copy of the Swagger
UI 5 assets, never a CDN, so it works air-gapped and no visit tells a third party who runs a
memory service. (``swagger-ui-bundle`` ships Swagger UI 4, which cannot render the OpenAPI
3.1 document FastAPI writes. ReDoc, which FastAPI would load from a CDN, is off.) Only the
package's static files are used, not its ``FastAPIOffline`` app factory."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install(app: FastAPI) -> None:
    import fastapi_offline

    static = Path(fastapi_offline.__file__).parent / "static"
    app.mount(ASSETS, StaticFiles(directory=str(static)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - API docs",
            oauth2_redirect_url=root + "/docs/oauth2-redirect",
            swagger_js_url=root + ASSETS + "/swagger-ui-bundle.js",
            swagger_css_url=root + ASSETS + "/swagger-ui.css",
            swagger_favicon_url=root + ASSETS + "/favicon.png",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
