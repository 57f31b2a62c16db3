"""api/docs.py: /docs serves Swagger UI from the package's own assets, never a CDN (it works
air-gapped, and no visit tells a third party who runs the service); the OpenAPI document is
served beside it."""

from __future__ import annotations

import httpx


async def test_openapi_docs_served(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/whoami" in spec["paths"]


async def test_the_docs_page_loads_nothing_from_elsewhere(client: httpx.AsyncClient) -> None:
    page = (await client.get("/docs")).text
    assert "/docs/assets/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "https://" not in page
    assert (await client.get("/docs/assets/swagger-ui-bundle.js")).status_code == 200
    assert (await client.get("/docs/oauth2-redirect")).status_code == 200
