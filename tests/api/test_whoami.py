"""api/whoami.py: GET /v1/whoami answers what the presented key may do (its org, scopes and
limits, and the server's batch and body bounds), and stops answering once the key is revoked."""

from __future__ import annotations

import httpx

from tests.conftest import Key, KeyFactory


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
