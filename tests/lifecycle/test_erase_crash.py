"""An erase is one transaction: kill -9 the process in the middle of it and nothing is
erased; run it again and everything is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
from fastapi import FastAPI

from service.domain.audit import AuditContext
from service.domain.auth import Caller
from service.domain.erase import erase_namespace
from tests.conftest import Key

REPO = Path(__file__).resolve().parents[2]


def counts(url: str, org_id: object) -> tuple[int, int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM memories WHERE org_id = %(o)s),"
            " (SELECT count(*) FROM relations WHERE org_id = %(o)s),"
            " (SELECT count(*) FROM artifacts WHERE org_id = %(o)s)",
            {"o": org_id},
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


async def test_kill_9_in_the_middle_erases_nothing(
    client: httpx.AsyncClient, key: Key, pg_url: str, app: FastAPI, tmp_path: Path
) -> None:
    first = await client.post(
        "/v1/remember",
        json={"namespace": "erin", "type": "decision",
              "content": "Erin deploys on Fridays only after the canary has been green for an hour."},
        headers=key.headers,
    )
    await client.post(
        "/v1/remember",
        json={"namespace": "erin:s1", "type": "gotcha",
              "content": "The canary dashboard lags five minutes behind the real error rate.",
              "related": [{"id": first.json()["id"]}]},
        headers=key.headers,
    )
    await client.post(
        "/v1/artifacts",
        json={"namespace": "erin", "name": "canary config", "body": {"window": 60}},
        headers=key.headers,
    )
    before = counts(pg_url, key.org_id)
    assert before == (3, 1, 1)

    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.lifecycle.erase_worker", pg_url, str(key.org_id), "erin", str(marker)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "the worker exited before the middle of the erase"
            assert time.monotonic() < deadline, "the worker never reached the middle"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The server aborts the dead client's transaction; wait for its locks to go.
    deadline = time.monotonic() + 30
    while True:
        with psycopg.connect(pg_url) as conn:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%%'"
                " AND query ILIKE '%%memories%%'"
            ).fetchone()
        if not busy or busy[0] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert counts(pg_url, key.org_id) == before

    caller = Caller(key.org_id, key.key_id, "test", frozenset({"write"}))
    async with app.state.ctx.sessionmaker() as session:
        receipt = await erase_namespace(session, caller, "erin", AuditContext("erase", caller))
        await session.commit()
    assert receipt.erased.memories == 3
    assert counts(pg_url, key.org_id) == (0, 0, 0)
