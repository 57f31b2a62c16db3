"""Two ``ctxpack serve`` processes on one database behave as one service: the client
alternates between them, and a write on one is read on the other, a revocation applies on
both at once, and the rate limit (shared through the database) holds across both."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
from fastapi import FastAPI

from service.domain import keys as key_service
from tests.conftest import KeyFactory, serve_process

BURST = 8
FACT = "The staging database is rebuilt from the nightly snapshot every Sunday at 02:00 UTC."


@pytest.fixture(scope="module")
def two_servers(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two servers on the test database, each with the caller cache on (keys are looked up
    once per process) and a rate limit of BURST calls, refilled at one a minute."""
    env = {
        "CTXPACK_RATE_LIMIT_PER_MINUTE": "1",
        "CTXPACK_RATE_LIMIT_BURST": str(BURST),
        "CTXPACK_AUTH_CACHE_SECONDS": "60",
        "CTXPACK_EXPIRY_PURGE_INTERVAL_SECONDS": "0",
    }
    logs = tmp_path_factory.mktemp("two-servers")
    with ExitStack() as stack:
        bases = [
            stack.enter_context(serve_process(pg_url, logs / f"serve-{i}.log", **env))
            for i in range(2)
        ]
        yield bases


async def test_a_write_on_one_is_read_on_the_other(
    two_servers: list[str], make_key: KeyFactory
) -> None:
    key = await make_key()
    a, b = (httpx.AsyncClient(base_url=base, headers=key.headers) for base in two_servers)
    async with a, b:
        written = await a.post("/v1/remember", json={"namespace": "ops", "content": FACT})
        assert written.status_code == 201, written.text
        memory_id = written.json()["id"]
        read = await b.get(f"/v1/memories/{memory_id}")
        assert read.status_code == 200, read.text
        assert read.json()["content"] == FACT
        changed = await b.patch(
            f"/v1/memories/{memory_id}", json={"content": FACT.replace("Sunday", "Saturday")}
        )
        assert changed.status_code == 200, changed.text
        listed = (await a.get("/v1/memories", params={"namespace": "ops"})).json()["items"]
        assert [m["content"] for m in listed] == [FACT.replace("Sunday", "Saturday")]
        pack = await b.post("/v1/context", json={"namespace": "ops", "goal": "staging database"})
        items = [i["id"] for s in pack.json()["sections"] for i in s["items"]]
        assert items == [memory_id]


async def test_a_revocation_applies_on_both_at_once(
    two_servers: list[str], make_key: KeyFactory, app: FastAPI
) -> None:
    key = await make_key()
    a, b = (httpx.AsyncClient(base_url=base, headers=key.headers) for base in two_servers)
    async with a, b:
        # Both processes have the key in their caller cache.
        for client in (a, b):
            assert (await client.get("/v1/whoami")).status_code == 200
        async with app.state.ctx.sessionmaker() as session:
            await key_service.revoke_key(session, str(key.key_id))
            await session.commit()
        revoked_at = time.monotonic()
        statuses: dict[str, int] = {}
        while len(statuses) < 2 and time.monotonic() - revoked_at < 2:
            for name, client in (("a", a), ("b", b)):
                if name not in statuses and (await client.get("/v1/whoami")).status_code == 401:
                    statuses[name] = 401
            await asyncio.sleep(0.01)
        # The NOTIFY reaches both within milliseconds; never a 200 afterwards.
        assert statuses == {"a": 401, "b": 401}
        for client in (a, b, a, b):
            assert (await client.get("/v1/memories")).status_code == 401


async def test_the_rate_limit_holds_across_both(
    two_servers: list[str], make_key: KeyFactory
) -> None:
    key, other = await make_key(), await make_key()
    a, b = (httpx.AsyncClient(base_url=base, headers=key.headers) for base in two_servers)
    async with a, b:
        servers = itertools.cycle((a, b))
        statuses = [(await next(servers).get("/v1/whoami")).status_code for _ in range(BURST + 4)]
        # Each process alone would allow BURST; together they allow BURST, not twice it.
        assert statuses == [200] * BURST + [429] * 4, statuses
        refused = await a.get("/v1/whoami")
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        # Another key has a bucket of its own, on either process.
        for base in two_servers:
            ok = await a.get(f"{base}/v1/whoami", headers=other.headers)
            assert ok.status_code == 200
