"""``ctxpack audit export`` and ``ctxpack audit tail``, against the test database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import anyio.to_thread
import pytest
from fastapi import FastAPI

from service.cli import main
from service.domain.audit import export_audit, tail_audit
from tests.conftest import KeyFactory
from tests.domain.audit.conftest import Seed


def _run(args: list[str]) -> Any:
    # The CLI runs its own event loop: call it from a worker thread, as a process would.
    return anyio.to_thread.run_sync(main, args)


async def test_export_writes_the_range_as_json_lines(
    pg_url: str, make_key: KeyFactory, seed: Seed, capsys: pytest.CaptureFixture[str]
) -> None:
    key = await make_key()
    other = await make_key()
    ids = [
        await seed(key.org_id, minutes=i, action="context" if i % 2 else "remember")
        for i in range(6)
    ]
    await seed(other.org_id, minutes=3)
    args = ["audit", "export", "--org", key.org, "--database-url", pg_url]

    assert await _run([*args, "--since", "2026-11-01T12:01:00Z", "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    # Oldest first, the whole row, only this org.
    assert [r["id"] for r in rows] == [str(i) for i in ids[1:]]
    assert set(rows[0]) >= {"id", "created_at", "action", "request", "details", "memory_ids"}

    assert await _run([*args, "--since", "2026-11-01 12:01", "--until", "2026-11-01T12:03Z"]) == 0
    assert [json.loads(x)["id"] for x in capsys.readouterr().out.splitlines()] == [
        str(ids[1]),
        str(ids[2]),
    ]

    assert await _run([*args, "--since", "2026-11-01", "--action", "context"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


async def test_export_errors_are_clean(
    pg_url: str, make_key: KeyFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    await make_key()
    await make_key()  # several orgs: --org is required
    base = ["audit", "export", "--database-url", pg_url]
    assert await _run([*base, "--since", "2026-11-01"]) == 2
    assert "--org" in capsys.readouterr().err
    assert await _run([*base, "--since", "2026-11-01", "--org", "no-such-org"]) == 2
    assert "not_found" in capsys.readouterr().err
    assert await _run([*base, "--since", "last tuesday", "--org", "x"]) == 2
    assert "--since" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        await _run([*base, "--since", "2026-11-01", "--format", "csv"])


async def test_export_pages_with_the_cursor(app: FastAPI, make_key: KeyFactory, seed: Seed) -> None:
    key = await make_key()
    # Ties on created_at across page boundaries: the keyset breaks them on id.
    ids = {await seed(key.org_id, minutes=i // 3) for i in range(10)}
    async with app.state.ctx.sessionmaker() as session:
        rows = [e async for e in export_audit(session, key.org_id, page_size=3)]
    assert len(rows) == 10
    assert {r.id for r in rows} == ids
    assert [r.created_at for r in rows] == sorted(r.created_at for r in rows)


async def test_tail_follows_new_rows_including_late_commits(
    app: FastAPI, make_key: KeyFactory, seed: Seed
) -> None:
    key = await make_key()
    history = [await seed(key.org_id, minutes=i) for i in range(3)]
    stream = tail_audit(
        app.state.ctx.sessionmaker, key.org_id, backlog=2, poll_seconds=0.01, lag_seconds=60
    )
    try:
        backlog = [(await anext(stream)).id for _ in range(2)]
        assert backlog == history[1:]
        newer = await seed(key.org_id, minutes=10)
        assert (await asyncio.wait_for(anext(stream), 5)).id == newer
        # Stamped earlier than the last row shown (its transaction started first) but
        # committed later: still shown, once.
        late = await seed(key.org_id, minutes=9.5)
        assert (await asyncio.wait_for(anext(stream), 5)).id == late
        other_action = await seed(key.org_id, minutes=11, action="context")
        assert (await asyncio.wait_for(anext(stream), 5)).id == other_action
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(stream), 0.2)
    finally:
        await stream.aclose()


async def test_tail_command_prints_json_lines(
    pg_url: str, make_key: KeyFactory, seed: Seed
) -> None:
    key = await make_key()
    first = await seed(key.org_id, minutes=0, action="context")
    await seed(key.org_id, minutes=1, action="remember")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "audit",
        "tail",
        "--org",
        key.org,
        "--action",
        "context",
        "--interval",
        "0.1",
        "--database-url",
        pg_url,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert json.loads(line)["id"] == str(first)
        later = await seed(key.org_id, minutes=2, action="context")
        line = await asyncio.wait_for(proc.stdout.readline(), 10)
        assert json.loads(line)["id"] == str(later)
    finally:
        proc.terminate()
        await proc.wait()


def test_tail_and_export_are_in_the_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service", "audit", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "tail" in result.stdout
    assert "export" in result.stdout
