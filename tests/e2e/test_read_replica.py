"""``CTXPACK_READ_DATABASE_URL``: context packs and memory lists read on a hot standby (made
by the wheel's own ``pg_basebackup``), their audit rows reach the primary, a key revoked on
the primary is refused on reads too, and ``X-Ctxpack-Consistency: primary`` reads one's own
write before the standby has it.

To tell the standby's answer from the primary's, the tests pause the standby's WAL replay
(``pg_wal_replay_pause``): a write made then is on the primary only.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from bench.replicas import Standby, start_standby
from service.app import create_app
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.store import namespace_indexes
from service.store.database import libpq_url
from tests.conftest import Key, KeyFactory, make_settings

PRIMARY = {"X-Ctxpack-Consistency": "primary"}
FACT = "Deploys to production need two approvals from the platform team since March."
OTHER = "The billing service retries webhooks five times with exponential backoff."


@pytest.fixture(scope="module")
def standby(pg_server: Any, pg_url: str) -> Iterator[Standby]:
    # Outside pytest's tmp_path, which only root may enter: the standby runs as the
    # embedded server's user.
    root = Path(tempfile.mkdtemp(prefix="ctxpack-standby-"))
    root.chmod(0o755)
    replica = start_standby(pg_server.get_uri(), root / "standby")
    try:
        yield replica
    finally:
        replica.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def replica_url(standby: Standby, pg_url: str) -> str:
    return standby.url(urlsplit(pg_url).path.lstrip("/"))


@pytest.fixture
async def replica_app(pg_url: str, replica_url: str) -> AsyncIterator[FastAPI]:
    settings = make_settings(
        pg_url,
        read_database_url=replica_url,
        audit_prune_interval_seconds=0,
        expiry_purge_interval_seconds=0,
    )
    application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def rc(replica_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=replica_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@contextmanager
def replay_paused(replica_url: str) -> Iterator[None]:
    """The standby applies no WAL inside the block (and catches up after it)."""
    with psycopg.connect(replica_url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            yield
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")


async def caught_up(pg_url: str, replica_url: str) -> None:
    """Wait until the standby has replayed everything the primary has written."""

    def wait() -> None:
        with psycopg.connect(libpq_url(pg_url)) as primary:
            row = primary.execute("SELECT pg_current_wal_lsn()").fetchone()
            assert row is not None
        with psycopg.connect(replica_url) as replica:
            for _ in range(500):
                done = replica.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (str(row[0]),)
                ).fetchone()
                if done == (True,):
                    return
                replica.execute("SELECT pg_sleep(0.01)")
        raise AssertionError("the standby did not catch up")

    await asyncio.to_thread(wait)


def ids(pack: dict[str, Any]) -> list[str]:
    return [i["id"] for s in pack["sections"] for i in s["items"]]


async def _remember(client: httpx.AsyncClient, key: Key, content: str) -> str:
    response = await client.post(
        "/v1/remember", json={"namespace": "ops", "content": content}, headers=key.headers
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_reads_go_to_the_replica_and_the_header_to_the_primary(
    rc: httpx.AsyncClient, make_key: KeyFactory, pg_url: str, replica_url: str
) -> None:
    key = await make_key()
    first = await _remember(rc, key, FACT)
    await caught_up(pg_url, replica_url)
    with replay_paused(replica_url):
        second = await _remember(rc, key, OTHER)
        # The standby does not have the second write yet: lists and packs read there miss it.
        listed = await rc.get("/v1/memories", params={"namespace": "ops"}, headers=key.headers)
        assert [m["id"] for m in listed.json()["items"]] == [first]
        body = {"namespace": "ops", "goal": "billing webhooks retries", "layer": "recall"}
        pack = await rc.post("/v1/context", json=body, headers=key.headers)
        assert pack.status_code == 200, pack.text
        assert second not in ids(pack.json())
        # Read-your-writes: the header sends the read to the primary.
        fresh = await rc.get(
            "/v1/memories", params={"namespace": "ops"}, headers={**key.headers, **PRIMARY}
        )
        assert {m["id"] for m in fresh.json()["items"]} == {first, second}
        fresh_pack = await rc.post("/v1/context", json=body, headers={**key.headers, **PRIMARY})
        assert second in ids(fresh_pack.json())
        # A single read (GET by id) and every write stay on the primary.
        got = await rc.get(f"/v1/memories/{second}", headers=key.headers)
        assert got.status_code == 200
    await caught_up(pg_url, replica_url)
    pack = await rc.post("/v1/context", json=body, headers=key.headers)
    assert second in ids(pack.json())


async def test_audit_rows_of_replica_reads_reach_the_primary(
    rc: httpx.AsyncClient, make_key: KeyFactory, pg_url: str, replica_url: str
) -> None:
    key = await make_key()
    await _remember(rc, key, FACT)
    await caught_up(pg_url, replica_url)
    with replay_paused(replica_url):
        for layer in ("recall", "wake"):
            pack = await rc.post(
                "/v1/context",
                json={"namespace": "ops", "goal": "deploy approvals", "layer": layer},
                headers=key.headers,
            )
            assert pack.status_code == 200, pack.text
        assert (await rc.get("/v1/memories", headers=key.headers)).status_code == 200
    with psycopg.connect(libpq_url(pg_url)) as conn:
        rows = conn.execute(
            "SELECT action, outcome FROM audit_events WHERE key_id = %s ORDER BY created_at",
            (key.key_id,),
        ).fetchall()
    assert rows == [
        ("remember", "created"), ("context", "ok"), ("context", "ok"), ("list", "ok"),
    ]  # fmt: skip


async def test_the_wide_ranking_path_runs_on_the_replica(
    pg_url: str, replica_url: str, make_key: KeyFactory
) -> None:
    """A scope with its own indexes (store/namespace_indexes.py) sets its HNSW knobs in a
    transaction of its own: on the standby, a read-only one."""
    settings = make_settings(pg_url, read_database_url=replica_url)
    application = create_app(settings, embedder=FakeEmbedder(), database_url=pg_url)
    key = await make_key()
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            memory_id = await _remember(client, key, FACT)
            engine = application.state.ctx.engine
            report = await namespace_indexes.sync(engine, 0, org_id=key.org_id)
            assert report.built
            await caught_up(pg_url, replica_url)
            with replay_paused(replica_url):
                pack = await client.post(
                    "/v1/context",
                    json={"namespace": "ops", "goal": "deploy approvals production"},
                    headers=key.headers,
                )
    assert pack.status_code == 200, pack.text
    assert ids(pack.json()) == [memory_id]


async def test_a_key_revoked_on_the_primary_is_refused_on_reads(
    rc: httpx.AsyncClient, replica_app: FastAPI, make_key: KeyFactory, replica_url: str
) -> None:
    key = await make_key()
    assert (await rc.get("/v1/memories", headers=key.headers)).status_code == 200
    with replay_paused(replica_url):
        # The standby still shows the key active; authentication reads the primary.
        async with replica_app.state.ctx.sessionmaker() as session:
            await key_service.revoke_key(
                session, str(key.key_id), cache=replica_app.state.ctx.callers
            )
            await session.commit()
        with psycopg.connect(replica_url) as conn:
            still = conn.execute(
                "SELECT revoked_at IS NULL FROM api_keys WHERE id = %s", (key.key_id,)
            ).fetchone()
        assert still == (True,)
        listed = await rc.get("/v1/memories", headers=key.headers)
        assert listed.status_code == 401
        pack = await rc.post(
            "/v1/context", json={"namespace": "ops", "goal": "deploys"}, headers=key.headers
        )
        assert pack.status_code == 401


def test_standby_is_read_only(replica_url: str) -> None:
    with psycopg.connect(replica_url) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO orgs (org_id, name) VALUES (%s, 'x')", (uuid.uuid4(),))
