"""Probes, auth and the error tree."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Key, KeyFactory


async def test_healthz_and_readyz(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "embedder": "ok"}


async def test_openapi_docs_served(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 200
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/whoami" in spec["paths"]


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


async def test_whoami_reflects_key_limits(client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    key = await make_key(scopes=["read"], projects=["p1"], namespaces=["alice:s1"])
    body = (await client.get("/v1/whoami", headers=key.headers)).json()
    assert body["scopes"] == ["read"]
    assert body["projects"] == ["p1"]
    assert body["namespace_prefixes"] == ["alice:s1"]
    assert body["org_id"] == str(key.org_id)


async def test_revoked_key_is_refused(client: httpx.AsyncClient, key: Key, app: object) -> None:
    from service.domain import keys as key_service

    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 200
    async with app.state.ctx.sessionmaker() as session:  # type: ignore[attr-defined]
        # This process's own cache drops the key at commit; others hear the NOTIFY.
        await key_service.revoke_key(
            session,
            str(key.key_id),
            cache=app.state.ctx.callers,  # type: ignore[attr-defined]
        )
        await session.commit()
    assert (await client.get("/v1/whoami", headers=key.headers)).status_code == 401


async def test_unknown_route_is_json_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_oversized_body_is_413_before_work(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    big = b"x" * (5 * 1024 * 1024)
    response = await client.post("/v1/whoami", content=big, headers=auth)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


async def test_keys_are_stored_hashed(key: Key, pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT key_hash, key_prefix FROM api_keys WHERE id = %s", (key.key_id,)).fetchall()
        dump = conn.execute("SELECT string_agg(t::text, ' ') FROM api_keys t").fetchone()
    assert rows and rows[0][0] != key.key
    assert key.key not in (dump[0] or "")
