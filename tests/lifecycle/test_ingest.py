"""ctxpack ingest: formats, one memory per turn, sessions, valid_at, external ids, resume,
idempotent reruns, links, and the command itself."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from service.embedding.fake import FakeEmbedder
from service.errors import InvalidInput
from service.lifecycle.ingest import (
    Checkpoint,
    HttpTarget,
    IngestSummary,
    LocalTarget,
    Mapping,
    ingest,
    item_of,
    read_turns,
)
from service.lifecycle.local import operator
from service.resources import open_resources
from tests.conftest import Key, SqlRows, audit_transports, make_settings
from tests.domain.test_ingest import JSONL, LOCOMO

REPO = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def local_target(pg_url: str, key: Key) -> AsyncIterator[LocalTarget]:
    settings = make_settings(pg_url)
    async with open_resources(
        settings, database_url=pg_url, embedder=FakeEmbedder(), listen=False
    ) as res:
        yield LocalTarget(res, operator(key.org_id))


def memories(url: str, org_id: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT namespace, content, valid_at, metadata->>'external_id' FROM memories"
            " WHERE org_id = %s ORDER BY valid_at", (org_id,),
        ).fetchall()


async def test_local_ingest_resume_and_rerun(pg_url: str, key: Key, tmp_path: Path) -> None:
    fmt, turns = read_turns(JSONL)
    mapping = Mapping("kim")

    class Interrupting:
        def __init__(self, inner: LocalTarget) -> None:
            self.inner, self.calls = inner, 0

        async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return await self.inner.send(items)

    ck = tmp_path / "ck.jsonl"
    async with local_target(pg_url, key) as target:
        first = IngestSummary()
        with Checkpoint(ck) as checkpoint, pytest.raises(KeyboardInterrupt):
            await ingest(turns, Interrupting(target), mapping, fmt, checkpoint=checkpoint, summary=first, batch_size=2)
        assert first.interrupted and first.created == 2
        assert len(memories(pg_url, key.org_id)) == 2

        with Checkpoint(ck) as checkpoint:
            resumed = await ingest(turns, target, mapping, fmt, checkpoint=checkpoint, summary=IngestSummary(), batch_size=2)
        assert resumed.resumed == 2 and resumed.created == 3
        assert resumed.rejected == {"stack_trace": 1}

        # Without the resume file, a rerun is idempotent: every turn is an exact duplicate.
        again = await ingest(turns, target, mapping, fmt, checkpoint=Checkpoint(None), summary=IngestSummary(), batch_size=4)
        assert again.created == 0 and again.duplicate == 5

    rows = memories(pg_url, key.org_id)
    assert [r[0] for r in rows] == ["kim:s1"] * 3 + ["kim:s2"] * 2
    assert rows[0][1] == "Ana: I moved to Lisbon last spring to join a robotics startup."
    assert rows[0][2].isoformat().startswith("2024-04-02T09:00:00")
    assert all(r[3] for r in rows)


async def test_http_ingest_with_links(app: FastAPI, key: Key, pg_url: str, tmp_path: Path) -> None:
    fmt, turns = read_turns(json.dumps(LOCOMO))
    target = HttpTarget("http://test", key.key, transport=httpx.ASGITransport(app=app))
    try:
        with Checkpoint(tmp_path / "ck") as checkpoint:
            summary = await ingest(
                turns, target, Mapping("loco-{conversation}"), fmt,
                checkpoint=checkpoint, summary=IngestSummary(), links=True,
            )
    finally:
        await target.close()
    assert summary.created == 3
    with psycopg.connect(pg_url) as conn:
        edges = conn.execute(
            "SELECT r.relationship FROM relations r WHERE r.org_id = %s", (key.org_id,)
        ).fetchall()
    assert [e[0] for e in edges] == ["follows"]

    refused = HttpTarget("http://test", "ctxp_wrong", transport=httpx.ASGITransport(app=app), retries=0)
    try:
        from service.errors import CtxpackError

        with pytest.raises(CtxpackError):
            await refused.send([item_of(turns[0], Mapping("x"), fmt)])
    finally:
        await refused.close()


async def test_the_command(pg_url: str, key: Key, tmp_path: Path) -> None:
    """ingest, export, erase through `python -m service`, on the local database."""
    data = tmp_path / "chat.jsonl"
    data.write_text(JSONL)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CTXPACK_EMBEDDER": "fake", "CTXPACK_DATABASE_URL": pg_url,
           "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "service", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)

    done = run("ingest", str(data), "--namespace", "lee", "--org", key.org, "--batch-size", "4")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["created"] == 5 and summary["rejected"] == 1
    assert "rejected" in done.stderr and "ingest:" in done.stderr  # plain progress lines off a TTY
    again = run("ingest", str(data), "--namespace", "lee", "--org", key.org)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["skipped_already_done"] == 6

    exported = run("export", "--org", key.org, "--namespace", "lee")
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 1 + 5 + 1
    lines = [json.loads(line) for line in exported.stdout.splitlines()[1:-1]]
    assert all(m["key"] and m["key"] == m["source"] for m in lines)  # each turn under its key

    refused = run("erase", "--namespace", "lee", "--org", key.org)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    erased = run("erase", "--namespace", "lee", "--org", key.org, "--yes")
    assert erased.returncode == 0, erased.stderr
    assert json.loads(erased.stdout)["erased"]["memories"] == 5


async def test_ctrl_c_stops_cleanly_and_a_rerun_resumes(pg_url: str, key: Key, tmp_path: Path) -> None:
    import signal
    import time

    data = tmp_path / "big.jsonl"
    data.write_text("\n".join(
        json.dumps({"text": f"Turn {i}: the team agreed that service {i} keeps its own database schema.",
                    "speaker": "Ana" if i % 2 else "Ben", "session": i // 100, "id": f"t{i}"})
        for i in range(1500)
    ))
    ck = tmp_path / "resume.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CTXPACK_EMBEDDER": "fake", "CTXPACK_DATABASE_URL": pg_url}
    command = [sys.executable, "-m", "service", "ingest", str(data), "--namespace", "max", "--org", key.org,
               "--batch-size", "5", "--checkpoint", str(ck)]
    # A run in the background (nohup, &) inherits SIGINT ignored; the user at a terminal does not.
    proc = subprocess.Popen(
        command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not (ck.exists() and ck.stat().st_size > 0):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert first["interrupted"] and 0 < first["created"] < 1500
    assert "run the same command again to resume" in err
    done = len(ck.read_text().splitlines())
    with psycopg.connect(pg_url) as conn:
        stored = conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (key.org_id,)).fetchone()
    assert done == first["created"]
    # Whole batches only: the one in flight rolled back, or committed just before the signal
    # landed (its turns then come back as duplicates).
    assert stored is not None and stored[0] - done in (0, 5)

    again = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["skipped_already_done"] == done
    assert second["created"] == 1500 - stored[0] and second["duplicate"] == stored[0] - done


def keyed(url: str, org_id: Any) -> list[tuple[Any, ...]]:
    """(namespace, key, content, current?) of every memory, oldest first."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT namespace, key, content, superseded_by IS NULL FROM memories"
            " WHERE org_id = %s ORDER BY created_at, valid_at", (org_id,),
        ).fetchall()


async def test_rerun_is_idempotent_by_key_and_an_edited_turn_is_updated(pg_url: str, key: Key, tmp_path: Path) -> None:
    rows = [
        {"id": "m1", "text": "I moved to Lisbon last spring to join a robotics startup.", "speaker": "Ana", "session": 1},
        {"id": "m2", "text": "We build warehouse robots that sort parcels by weight and size.", "speaker": "Ana", "session": 1},
        {"id": "m3", "text": "My sister adopted a grey kitten called Pixel last weekend.", "speaker": "Ben", "session": 1},
    ]
    fmt, turns = read_turns("\n".join(json.dumps(r) for r in rows))
    ck = tmp_path / "ck.jsonl"
    async with local_target(pg_url, key) as target:
        with Checkpoint(ck) as checkpoint:
            first = await ingest(turns, target, Mapping("kim"), fmt, checkpoint=checkpoint, summary=IngestSummary())
        assert first.created == 3
        stored = keyed(pg_url, key.org_id)
        assert sorted(r[1] for r in stored) == ["m1", "m2", "m3"] and all(r[3] for r in stored)

        # Without the resume file: every turn is a keyed duplicate, nothing new is stored.
        again = await ingest(turns, target, Mapping("kim"), fmt, checkpoint=Checkpoint(None), summary=IngestSummary())
        assert (again.created, again.updated, again.duplicate) == (0, 0, 3)

        # m2 edited in the file: the same command (same resume file) sends only m2, which
        # replaces the memory under its key; the old text is kept as history.
        rows[1]["text"] = "We build warehouse robots that sort parcels by weight, size and destination."
        fmt, edited = read_turns("\n".join(json.dumps(r) for r in rows))
        with Checkpoint(ck) as checkpoint:
            rerun = await ingest(edited, target, Mapping("kim"), fmt, checkpoint=checkpoint, summary=IngestSummary())
        assert (rerun.resumed, rerun.created, rerun.updated, rerun.duplicate) == (2, 0, 1, 0)
        with Checkpoint(ck) as checkpoint:
            assert (await ingest(edited, target, Mapping("kim"), fmt, checkpoint=checkpoint,
                                 summary=IngestSummary())).resumed == 3

    stored = keyed(pg_url, key.org_id)
    m2 = [(r[2], r[3]) for r in stored if r[1] == "m2"]
    assert sorted(m2) == [
        ("Ana: We build warehouse robots that sort parcels by weight and size.", False),
        ("Ana: We build warehouse robots that sort parcels by weight, size and destination.", True),
    ]
    assert len(stored) == 4


async def test_the_same_words_twice_are_one_memory(app: FastAPI, pg_url: str, key: Key, tmp_path: Path) -> None:
    """Two turns with the same text in one namespace: the second cannot hold a key of its own
    (remember refuses it), so it is sent without one and is a duplicate, as before keys; in
    one batch (422) or across batches (409), over HTTP and locally."""
    said = "Sounds great, see you at the climbing gym on Saturday morning then!"
    rows = [
        {"id": "a1", "text": "Shall we go climbing at the gym this Saturday morning?", "speaker": "Ana", "session": 1},
        {"id": "a2", "text": said, "speaker": "Ben", "session": 1},
        {"id": "a3", "text": "I will bring the spare harness and the chalk bag for you.", "speaker": "Ana", "session": 1},
        {"id": "a4", "text": said, "speaker": "Ben", "session": 1},
    ]
    fmt, turns = read_turns("\n".join(json.dumps(r) for r in rows))
    http = HttpTarget("http://test", key.key, transport=httpx.ASGITransport(app=app))
    try:
        for namespace, batch_size in (("one-batch", 4), ("across", 2)):
            summary = await ingest(turns, http, Mapping(namespace), fmt, checkpoint=Checkpoint(None),
                                   summary=IngestSummary(), batch_size=batch_size)
            assert (summary.created, summary.duplicate, summary.without_key) == (3, 1, 1), namespace
            rerun = await ingest(turns, http, Mapping(namespace), fmt, checkpoint=Checkpoint(None),
                                 summary=IngestSummary(), batch_size=batch_size)
            assert (rerun.created, rerun.duplicate, rerun.without_key) == (0, 4, 1), namespace
    finally:
        await http.close()
    async with local_target(pg_url, key) as target:
        local = await ingest(turns, target, Mapping("local"), fmt, checkpoint=Checkpoint(None),
                             summary=IngestSummary(), batch_size=4)
    assert (local.created, local.duplicate, local.without_key) == (3, 1, 1)
    stored = keyed(pg_url, key.org_id)
    for namespace in ("one-batch:s1", "across:s1", "local:s1"):
        assert sorted(r[1] for r in stored if r[0] == namespace) == ["a1", "a2", "a3"]


async def test_unparsed_timestamps_are_counted_not_dropped_silently(pg_url: str, key: Key, tmp_path: Path) -> None:
    rows = [
        {"text": "We switched the CI runners to arm64 to cut the build bill in half.", "speaker": "Ana",
         "timestamp": "29.12.2023, 00:51:12", "session": 1},
        {"text": "The staging cluster now autoscales between two and six nodes.", "speaker": "Ana",
         "timestamp": "sometime in spring", "session": 1},
    ]
    fmt, turns = read_turns("\n".join(json.dumps(r) for r in rows))
    async with local_target(pg_url, key) as target:
        summary = await ingest(turns, target, Mapping("tim"), fmt, checkpoint=Checkpoint(None),
                               summary=IngestSummary())
    assert summary.created == 2
    assert summary.unparsed_timestamps == 1 and summary.unparsed_samples == ["sometime in spring"]
    assert "timestamps not understood" in summary.text()
    dated = [r for r in memories(pg_url, key.org_id) if r[2] is not None]
    assert len(dated) == 1 and dated[0][2].isoformat() == "2023-12-29T00:51:12+00:00"


async def test_a_refused_local_batch_is_audited_as_a_cli_call(
    pg_url: str, key: Key, sql: SqlRows
) -> None:
    """The local target runs its batches through the call runner: a batch the domain refuses
    (a namespace holding a secret) leaves the runner's failure row, transport ``cli``."""
    secret_namespace = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    fact = "The staging database listens on port 5433; the default 5432 is the legacy cluster."
    async with local_target(pg_url, key) as target:
        with pytest.raises(InvalidInput):
            await target.send([{"namespace": secret_namespace, "content": fact}])
        stored = await target.send([{"namespace": "kim", "content": fact}])
    assert [i["status"] for i in stored] == ["created"]
    assert await audit_transports(sql, key) == [
        ("remember_batch", 422, "cli"),
        ("remember_batch", 200, None),
    ]
    assert secret_namespace not in str(await sql(
        "SELECT request::text, details::text FROM audit_events WHERE org_id = :o", o=key.org_id
    ))  # fmt: skip
