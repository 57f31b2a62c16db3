"""api/health.py: the probes. /healthz says the process is up; /readyz that the database
answers and the embedder is loaded, naming each check (503 ``not_ready`` while one is not)."""

from __future__ import annotations

import httpx


async def test_healthz_and_readyz(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "embedder": "ok"}
