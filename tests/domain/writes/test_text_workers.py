"""A large batch prepared in shards by the text worker processes (domain/writes/text_workers.py)
comes out as one thread prepares it: the same items in the same order, and the same first
error when an item is refused."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from service.config import Settings
from service.domain.auth import Caller
from service.domain.writes import text_workers
from service.domain.writes.text_workers import (
    MAX_FAILED_STARTS,
    SHARD_MIN_ITEMS,
    TextWorkers,
    cgroup_cpus,
    default_workers,
    prepare_in_thread,
    shard_bounds,
    workers_for,
)
from service.errors import CtxpackError, InvalidInput, NamespaceAccessDenied
from service.schemas.memories import RememberRequest

TOKEN = "ghp_a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8"
N = 3 * SHARD_MIN_ITEMS


def caller(*prefixes: str) -> Caller:
    return Caller(
        org_id=uuid.uuid4(),
        key_id=uuid.uuid4(),
        key_name="k",
        scopes=frozenset({"read", "write"}),
        namespace_prefixes=prefixes,
    )


def request(n: int) -> RememberRequest:
    """Every kind of item a batch holds: plain facts, secrets in the content, the name, a tag
    and the metadata, gate rejections (a fragment, a log), an expiry, three namespaces."""
    shapes: list[dict[str, Any]] = [
        {"content": f"The staging database listens on port {5400 + n}; use the pooler."},
        {"content": f"Deploy token for CI {n} is {TOKEN}, rotate it monthly.", "tags": ["ci"]},
        {"content": "ok"},
        {
            "content": "\n".join(
                f"2026-11-29 10:00:{s:02d} ERROR worker {n} died" for s in range(9)
            ),
            "type": "artifact",
        },
        {
            "content": f"Decided to pin psycopg {n} because 3.3 breaks COPY with pgvector.",
            "type": "decision",
            "name": f"psycopg pin, see {TOKEN}",
            "metadata": {"ticket": f"OPS-{n}", "auth": f"Bearer {TOKEN}"},
            "ttl_seconds": 86_400,
        },
    ]
    body = {"namespace": f"u{n % 3}:s{n % 2}", "type": "procedure", **shapes[n % len(shapes)]}
    return RememberRequest.model_validate(body)


def batch(n: int = N) -> list[RememberRequest]:
    return [request(i) for i in range(n)]


@pytest.fixture(scope="module")
async def workers() -> AsyncIterator[TextWorkers]:
    pool = TextWorkers(1)
    pool.start()
    yield await until_ready(pool)
    pool.close()


async def until_ready(pool: TextWorkers) -> TextWorkers:
    for _ in range(600):
        if pool.ready:
            return pool
        await asyncio.sleep(0.05)
    raise AssertionError("the text worker never answered")


async def until_broken(executor: concurrent.futures.ProcessPoolExecutor) -> None:
    """Until the pool knows a worker of its died."""
    for _ in range(600):
        if executor._broken:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the pool never noticed its worker died")


def a_batch() -> tuple[Settings, Caller, list[RememberRequest], list[dict[str, Any]]]:
    """Settings, a caller, a large batch and what one thread makes of it."""
    settings = Settings()
    who = caller()
    reqs = batch()
    return settings, who, reqs, fields(prepare_in_thread(reqs, who, settings))


def fields(items: list[Any]) -> list[dict[str, Any]]:
    """Each item as plain data, its expiry left out (a clock reading)."""
    out = []
    for item in items:
        data = asdict(item)
        data["request"] = item.request.model_dump()
        data["expires_at"] = item.expires_at is not None
        out.append(data)
    return out


def error_of(call: Any) -> CtxpackError:
    with pytest.raises(CtxpackError) as raised:
        call()
    return raised.value


async def test_shards_make_the_items_one_thread_makes(workers: TextWorkers) -> None:
    settings = Settings()
    who = caller()
    reqs = batch()
    threaded = prepare_in_thread(reqs, who, settings)
    sharded = await workers.prepare_batch(reqs, who, settings)
    assert fields(sharded) == fields(threaded)
    assert [i.index for i in sharded] == list(range(N))
    # The batch held what makes the comparison worth it: redactions in several fields,
    # rejections, accepted items.
    assert sum(bool(i.redactions) for i in sharded) >= N // 3
    stored = [{k: v for k, v in f.items() if k != "request"} for f in fields(sharded)]
    assert TOKEN not in repr(stored)
    assert sum(i.rejection is not None for i in sharded) >= N // 3
    assert sum(i.rejection is None for i in sharded) >= N // 3


@pytest.mark.parametrize(
    ("bad", "who"),
    [
        # A namespace holding a secret, in the worker's shard, then in each shard.
        ({N - 5: {"namespace": f"u1:{TOKEN}"}}, caller()),
        ({7: {"namespace": f"u1:{TOKEN}"}, N - 5: {"project": TOKEN}}, caller()),
        # A key limited to u0: the first item elsewhere is refused (item 1, in shard one).
        ({}, caller("u0")),
        # Only the worker's shard leaves the key's reach.
        ({N - 3: {"namespace": "elsewhere"}}, caller("u0", "u1", "u2")),
    ],
)
async def test_a_refused_item_fails_the_batch_as_in_one_thread(
    workers: TextWorkers, bad: dict[int, dict[str, str]], who: Caller
) -> None:
    settings = Settings()
    reqs = batch()
    for n, change in bad.items():
        reqs[n] = reqs[n].model_copy(update=change)
    expected = error_of(lambda: prepare_in_thread(reqs, who, settings))
    with pytest.raises(CtxpackError) as raised:
        await workers.prepare_batch(reqs, who, settings)
    got = raised.value
    assert type(got) is type(expected)
    assert got.details == expected.details and str(got) == str(expected)
    assert isinstance(got, InvalidInput | NamespaceAccessDenied)


@pytest.mark.parametrize("noticed", [False, True], ids=["at-once", "once-the-pool-knows"])
async def test_a_worker_that_dies_costs_the_batch_nothing(
    caplog: pytest.LogCaptureFixture, noticed: bool
) -> None:
    """Killed right before the batch, the shard's future fails; killed a while before (found
    by hand: a 500), the pool refuses the shard at submission. Either way the batch is
    prepared whole."""
    settings, who, reqs, expected = a_batch()
    pool = TextWorkers(1)
    pool.start()
    await until_ready(pool)
    try:
        executor = pool._pool
        assert executor is not None
        pid = await asyncio.get_running_loop().run_in_executor(executor, os.getpid)
        os.kill(pid, signal.SIGKILL)
        if noticed:
            await until_broken(executor)
        with caplog.at_level(logging.WARNING, logger="ctxpack.writes"):
            got = await pool.prepare_batch(reqs, who, settings)
        assert fields(got) == expected
        assert "text_worker_failed" in caplog.messages
        assert not pool.ready
        # The next large batch starts a new pool (and is prepared here meanwhile).
        assert fields(await pool.prepare_batch(reqs, who, settings)) == expected
        await until_ready(pool)
        assert fields(await pool.prepare_batch(reqs, who, settings)) == expected
    finally:
        pool.close()


async def test_without_workers_or_before_they_answer_the_thread_prepares_all() -> None:
    settings, who, reqs, expected = a_batch()
    none = TextWorkers(0)
    assert fields(await none.prepare_batch(reqs, who, settings)) == expected
    assert none._pool is None
    cold = TextWorkers(1)
    try:
        assert fields(await cold.prepare_batch(reqs, who, settings)) == expected
        assert cold._pool is not None  # the first large batch started the workers
    finally:
        cold.close()


async def test_a_worker_that_dies_before_it_answers_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Killed while it starts (found in review: the pool was kept, never ready, and every
    batch after it stayed in the thread until a restart, with nothing logged)."""
    settings, who, reqs, expected = a_batch()
    pool = TextWorkers(1)
    pool.start()
    try:
        executor = pool._pool
        assert executor is not None
        (pid,) = list(executor._processes)
        os.kill(pid, signal.SIGKILL)
        await until_broken(executor)
        assert not pool.ready
        with caplog.at_level(logging.WARNING, logger="ctxpack.writes"):
            assert fields(await pool.prepare_batch(reqs, who, settings)) == expected
        assert "text_worker_failed" in caplog.messages
        assert pool._pool is not None and pool._pool is not executor  # a new pool started
        await until_ready(pool)
        assert fields(await pool.prepare_batch(reqs, who, settings)) == expected
    finally:
        pool.close()


def _die_at_start(started: Any) -> None:
    """A worker that cannot start (as an import that fails would)."""
    os._exit(3)


async def test_workers_that_never_start_leave_batches_to_the_thread(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool whose workers die before they answer is tried ``MAX_FAILED_STARTS`` times,
    then never again; one the operating system refuses (no file descriptors left: found in
    review, the batch answered 500 and the server could not start) is logged, not raised."""
    settings, who, reqs, expected = a_batch()
    monkeypatch.setattr(text_workers, "_init_worker", _die_at_start)
    pool = TextWorkers(1)
    spawned: list[Any] = []
    try:
        with caplog.at_level(logging.WARNING, logger="ctxpack.writes"):
            for _ in range(MAX_FAILED_STARTS + 2):
                assert fields(await pool.prepare_batch(reqs, who, settings)) == expected
                if pool._pool is not None and pool._pool not in spawned:
                    spawned.append(pool._pool)
                    await until_broken(pool._pool)
        assert len(spawned) == MAX_FAILED_STARTS
        assert pool.disabled and pool._pool is None and not pool.ready
        assert "text_workers_disabled" in caplog.messages
    finally:
        pool.close()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", refused)
    cannot = TextWorkers(2)
    with caplog.at_level(logging.WARNING, logger="ctxpack.writes"):
        cannot.start()  # as the server's start-up does: no error
        assert fields(await cannot.prepare_batch(reqs, who, settings)) == expected
    assert "text_workers_unavailable" in caplog.messages
    assert cannot._pool is None and not cannot.ready


async def test_ctrl_c_is_the_server_s(workers: TextWorkers) -> None:
    """SIGINT reaches the workers too (the terminal's process group): they ignore it, so a
    batch in flight never gets ``KeyboardInterrupt`` back into the event loop (found in
    review) and the pool stays whole."""
    executor = workers._pool
    assert executor is not None
    pid = await asyncio.get_running_loop().run_in_executor(executor, os.getpid)
    os.kill(pid, signal.SIGINT)
    await asyncio.sleep(0.5)
    os.kill(pid, 0)  # still running
    settings, who, reqs, expected = a_batch()
    assert fields(await workers.prepare_batch(reqs, who, settings)) == expected
    assert workers._pool is executor and not executor._broken and workers.ready


async def test_ready_means_every_worker_answered() -> None:
    """Each warm-up holds its worker until all have one, so the pool is ready only once
    every worker has imported the write path (found in review on a loaded machine: the
    warm-ups could all be answered by the first worker up; a quiet one spreads them anyway,
    so this checks the property rather than replaying the race)."""
    pool = TextWorkers(3)
    pool.start()
    try:
        await until_ready(pool)
        assert len({f.result() for f in pool._warming}) == 3
    finally:
        pool.close()


def test_shards_cover_the_batch_in_order() -> None:
    for n in (0, 1, 63, 64, 65, 500):
        for shards in (1, 2, 3, 4):
            bounds = shard_bounds(n, shards)
            assert len(bounds) == shards
            assert [lo for lo, _ in bounds] == [0] + [hi for _, hi in bounds[:-1]]
            assert bounds[-1][1] == n
            sizes = [hi - lo for lo, hi in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_the_default_leaves_the_server_a_cpu(tmp_path: Path) -> None:
    cpus = len(os.sched_getaffinity(0))
    missing = tmp_path / "none"
    assert default_workers(missing, missing) == max(0, min(3, cpus - 1))
    assert workers_for(Settings(text_workers=0)) == 0
    assert workers_for(Settings(text_workers=2)) == 2
    assert workers_for(Settings()) == default_workers()


def cgroup(tmp_path: Path, membership: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup tree under ``tmp_path`` with ``files`` (relative path: content) and a
    ``/proc/self/cgroup`` that reads ``membership``."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "proc-cgroup"
    proc.write_text(membership)
    return root, proc


@pytest.mark.parametrize(
    ("membership", "files", "cpus"),
    [
        # A container started with --cpus=1.5 (cgroup v2, its own namespace).
        ("0::/\n", {"cpu.max": "150000 100000\n"}, 1.5),
        # A systemd service with CPUQuota=100% under a slice without one.
        (
            "0::/system.slice/ctxpack.service\n",
            {"cpu.max": "max 100000\n", "system.slice/ctxpack.service/cpu.max": "100000 100000"},
            1.0,
        ),
        # The tightest of a cgroup and its parents.
        (
            "0::/a/b\n",
            {"a/cpu.max": "50000 100000", "a/b/cpu.max": "max 100000"},
            0.5,
        ),
        # cgroup v1: a quota of two periods.
        (
            "4:memory:/x\n3:cpu,cpuacct:/\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "200000", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
            2.0,
        ),
        # No quota anywhere (v2 "max", v1 -1), or nothing readable.
        ("0::/\n", {"cpu.max": "max 100000\n"}, None),
        (
            "3:cpu,cpuacct:/\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
            None,
        ),
        ("0::/\n", {}, None),
    ],
)
def test_a_cgroup_s_cpu_quota_bounds_the_default(
    tmp_path: Path, membership: str, files: dict[str, str], cpus: float | None
) -> None:
    """Found in review: the default read the CPUs the process may run on, so a container
    given one CPU on a large host started three workers (about 255 MB) that shared it."""
    root, proc = cgroup(tmp_path, membership, files)
    assert cgroup_cpus(root, proc) == cpus
    affinity = len(os.sched_getaffinity(0))
    allowed = affinity if cpus is None else min(affinity, max(1, math.ceil(cpus)))
    assert default_workers(root, proc) == max(0, min(3, allowed - 1))


async def test_an_import_s_lines_are_each_prepared_or_refused_alone(workers: TextWorkers) -> None:
    """``prepare_each`` (``ctxpack import``): a refused line is None in its place, in either
    shard, and every other line is what one thread makes of it, fields named as sent."""
    settings = Settings()
    who = caller("u0", "u1", "u2")
    reqs = batch()
    bad = {0, 5, N // 2 + 1, N - 3, N - 2}
    for n in bad:
        reqs[n] = reqs[n].model_copy(update={"namespace": f"u1:{TOKEN}" if n % 2 else "elsewhere"})
    got = await workers.prepare_each(reqs, who, settings)
    assert [n for n, item in enumerate(got) if item is None] == sorted(bad)
    good = [n for n in range(N) if n not in bad]
    expected = dict(
        zip(
            good,
            prepare_in_thread([reqs[n] for n in good], who, settings, prefixed=False),
            strict=True,
        )
    )
    for n in good:
        item = got[n]
        assert item is not None and item.index == n and item.prefix == ""
        mine, theirs = fields([item])[0], fields([expected[n]])[0]
        assert {k: v for k, v in mine.items() if k != "index"} == {
            k: v for k, v in theirs.items() if k != "index"
        }


def test_a_pool_closed_while_it_starts_leaves_no_worker_failing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A server stopped (or a test app closed) while its workers still start: the workers
    read the warm-up's barrier from the server as they start, and it was released with the
    pool, so each printed a traceback (``FileNotFoundError`` from its semaphore); the
    barrier is now kept, and aborted so that no warm-up waits at it for a peer whose
    warm-up was cancelled."""
    pool = TextWorkers(2)
    pool.start()
    assert pool._pool is not None
    pids = list(pool._pool._processes)  # type: ignore[attr-defined]
    assert len(pids) == 2
    pool.close()
    # The pool's own thread reaps them: wait until they are gone.
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
