"""The lifecycle commands run through the call runner as the CLI face: ``ctxpack erase``
leaves an audit row (transport ``cli``) when it fails, as well as when it succeeds."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.conftest import Key

REPO = Path(__file__).resolve().parents[2]
FACT = "The billing export runs nightly at 02:00 UTC and writes to the archive bucket."


def ctxpack(pg_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CTXPACK_EMBEDDER": "fake",
           "CTXPACK_DATABASE_URL": pg_url}
    return subprocess.run([sys.executable, "-m", "service", *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)


def erase_rows(pg_url: str, org_id: uuid.UUID) -> list[tuple[str, int, dict]]:
    with psycopg.connect(pg_url) as conn:
        return conn.execute(
            "SELECT outcome, status_code, details FROM audit_events WHERE org_id = %s "
            "AND action = 'erase' ORDER BY created_at", (org_id,),
        ).fetchall()


async def test_a_failed_erase_is_audited_as_a_cli_call(
    client: httpx.AsyncClient, key: Key, pg_url: str, on_citus: bool
) -> None:
    if on_citus:
        pytest.skip("the failure is a trigger, which Citus refuses on a distributed table")
    made = await client.post("/v1/remember", json={"namespace": "ula", "content": FACT}, headers=key.headers)
    assert made.status_code == 201
    trigger = f"no_delete_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # A real database failure in the middle of the erase: deletes of this org's memories
        # raise until the trigger is dropped.
        conn.execute(
            f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF OLD.org_id = '{key.org_id}' THEN RAISE EXCEPTION 'disk on fire'; END IF; "
            "RETURN OLD; END $$"
        )
        conn.execute(f"CREATE TRIGGER {trigger} BEFORE DELETE ON memories FOR EACH ROW EXECUTE FUNCTION {trigger}()")
    try:
        failed = ctxpack(pg_url, "erase", "--namespace", "ula", "--org", key.org, "--yes")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER {trigger} ON memories")
            conn.execute(f"DROP FUNCTION {trigger}()")
    assert failed.returncode != 0
    rows = erase_rows(pg_url, key.org_id)
    assert [(r[0], r[1]) for r in rows] == [("error", 500)]
    assert rows[0][2]["transport"] == "cli" and rows[0][2]["error_code"] == "internal_error"
    # Nothing was erased; run again, it is, and audited as a success.
    done = ctxpack(pg_url, "erase", "--namespace", "ula", "--org", key.org, "--yes")
    assert done.returncode == 0, done.stderr
    assert [(r[0], r[1]) for r in erase_rows(pg_url, key.org_id)] == [("error", 500), ("erased", 200)]
