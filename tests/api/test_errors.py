"""api/errors.py: every refusal is the error tree's JSON body, ``{"error": {"code", "message",
...}}``, whatever raised it: an unknown or malformed key (401, with ``WWW-Authenticate``), an
unknown route, and an unexpected exception (500, saying nothing of it)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import AppFactory


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer ctxp_not-a-real-key"},
        {"Authorization": "Bearer something-else"},
    ],
    ids=["missing", "empty", "wrong-scheme", "unknown-key", "malformed"],
)
async def test_bad_keys_get_401_json(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    response = await client.get("/v1/whoami", headers=headers)
    assert response.status_code == 401
    body = response.json()
    assert body["error"]["code"] == "unauthorized"
    assert "Traceback" not in response.text


async def test_unknown_route_is_json_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"




async def test_a_401_asks_for_a_bearer_key(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/whoami")
    assert response.headers["www-authenticate"] == "Bearer"


async def test_an_unexpected_error_is_a_500_saying_nothing_of_it(app_with: AppFactory) -> None:
    async with app_with() as client:
        application = client.app  # type: ignore[attr-defined]

        @application.get("/v1/boom-for-test")
        async def boom() -> None:
            raise RuntimeError("the driver quoted ghp_secret here")

        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as raw:
            response = await raw.get("/v1/boom-for-test")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "internal_error", "message": "Internal error; see the server log"}
    }
