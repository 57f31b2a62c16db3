"""/docs: Swagger UI served from the ``swagger-ui-bundle`` Python package, never a CDN, so it
works air-gapped and no visit tells a third party who runs a memory service. (ReDoc, which
FastAPI would load from a CDN, is off.)"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install(app: FastAPI) -> None:
    import swagger_ui_bundle

    app.mount(ASSETS, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - API docs",
            oauth2_redirect_url=root + "/docs/oauth2-redirect",
            swagger_js_url=root + ASSETS + "/swagger-ui-bundle.js",
            swagger_css_url=root + ASSETS + "/swagger-ui.css",
            swagger_favicon_url=root + ASSETS + "/favicon-32x32.png",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
