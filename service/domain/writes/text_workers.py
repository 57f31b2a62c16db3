"""Write path, step 1 for a large batch: its items prepared in shards at once, one shard in
this process's worker thread and one in each text worker process.

Preparing an item (the key's rights, redaction, the gate, the hash: ``prepare``) is pure
Python under the GIL, 0.2-0.3 ms an item in the server. A batch of 500 held one core for
0.1-0.14 s while the other stood idle: the model runs after it, the database after the
model. ``TextWorkers`` is a pool of spawned processes (``text_workers``: by default one less
than the CPUs this process may use, at most 3) that take the other cores for that step. A
batch of at least ``SHARD_MIN_ITEMS`` items is cut into contiguous shards, one per worker
and one for this process; each runs ``prepare`` itself on the same settings, so the items
that come back, in order, are the ones one thread makes.

- **Errors stay the thread's.** A shard that raises stops at that item and says which;
  that item (and the rest of its shard) is then prepared here, in order, after the shards
  before it, so the batch fails with the first failing item's own error (a 422 naming its
  field, a 403) exactly as in one thread. Only requests, settings, the caller and the
  prepared items cross between processes, never an exception.
- **A worker that dies** (killed, out of memory), before its first task or during one,
  breaks its pool: the batch's shards are prepared here, a warning is logged, and a new
  pool starts at the next large batch (which is prepared here while it warms). Any other
  failure of the pool's (a request it could not pickle, a shard cancelled by the pool's
  shutdown) has that shard prepared here too. A pool that cannot start (no file
  descriptors or processes left) or that breaks ``MAX_FAILED_STARTS`` times in a row
  without ever answering leaves every batch to the thread, with a warning.
- **Ctrl-C is the server's.** Workers ignore SIGINT (the terminal sends it to the whole
  process group): the server shuts down as it would without them, and closes the pool.
- **An import's lines** (``prepare_each``, from ``ctxpack import``) go the same way, each
  on its own: a refused line is None in its place and is counted, the others are prepared.
- **Started warm.** ``start`` spawns the workers and has each import the write path (about
  1 s, in the background); until every one of them has answered, batches are prepared
  here. The HTTP server
  starts them with its resources; a CLI command or MCP over stdio at its first large
  batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from service.config import Settings
from service.domain.auth import Caller
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.prepare import WriteItem, prepare
from service.errors import CtxpackError
from service.schemas.memories import RememberRequest

log = logging.getLogger("ctxpack.writes")

# Below this many items a batch is prepared in the thread alone: handing a shard to a
# process costs about 2-3 ms (pickling both ways and waking it), a fifth of 64 items' work.
SHARD_MIN_ITEMS = 64

# Workers by default at most: the step is a tenth of a large batch's time, and each worker
# holds the write path's modules (about 85 MB).
MAX_DEFAULT_WORKERS = 3

# Pools in a row that broke before every worker answered, after which batches stay in the
# thread: a worker that cannot start (an import that fails, a memory limit) would otherwise
# cost a spawn at every large batch.
MAX_FAILED_STARTS = 3

# How long a worker's warm-up task waits for the others to have started (each holds one
# warm-up task until all do, so that every worker has imported the write path).
WARM_TIMEOUT_S = 120.0

Shard = tuple[list[WriteItem], int | None]


def default_workers(
    cgroups: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> int:
    """One less than the CPUs this process may run on (its affinity, and its cgroup's CPU
    quota: a container's ``--cpus``), at most ``MAX_DEFAULT_WORKERS``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    quota = cgroup_cpus(cgroups, membership)
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(0, min(MAX_DEFAULT_WORKERS, cpus - 1))


def cgroup_cpus(cgroups: Path, membership: Path) -> float | None:
    """The CPUs a cgroup quota allows this process (the tightest over its cgroups and their
    parents: v2's ``cpu.max``, v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), or
    None without one (or where the files cannot be read)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    found: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, path = parts[1], parts[2]
        if controllers == "":
            base, read = cgroups, _v2_quota
        elif "cpu" in controllers.split(","):
            base, read = cgroups / controllers, _v1_quota
        else:
            continue
        folder = base / path.lstrip("/")
        for here in [folder, *(d for d in folder.parents if base in (d, *d.parents))]:
            quota = read(here)
            if quota is not None:
                found.append(quota)
    return min(found, default=None)


def _v2_quota(folder: Path) -> float | None:
    """cgroup v2: ``cpu.max`` is ``max 100000`` (none) or ``150000 100000`` (1.5 CPUs)."""
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else float(quota) / float(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_quota(folder: Path) -> float | None:
    """cgroup v1: ``cpu.cfs_quota_us`` (-1: none) over ``cpu.cfs_period_us``."""
    try:
        quota = float((folder / "cpu.cfs_quota_us").read_text())
        period = float((folder / "cpu.cfs_period_us").read_text())
        return None if quota < 0 else quota / period
    except (OSError, ValueError, ZeroDivisionError):
        return None


def workers_for(settings: Settings) -> int:
    """The worker processes ``settings`` ask for (``text_workers``; None: the default)."""
    return default_workers() if settings.text_workers is None else settings.text_workers


def item_prefix(index: int, prefixed: bool = True) -> str:
    """How a batch item's fields are named in an error: ``items.3.`` (``""`` unprefixed: an
    import's line, whose errors are counted, not raised)."""
    return f"items.{index}." if prefixed else ""


def prepare_shard(
    start: int,
    requests: Sequence[RememberRequest],
    caller: Caller,
    settings: Settings,
    prefixed: bool = True,
) -> Shard:
    """Items ``start``, ``start + 1``, ... of a batch, prepared in order until one raises:
    the items before it and its index (None when none raised). Runs in a worker process
    (and in this one's thread for the first shard)."""
    pipeline = WritePipeline.for_settings(settings)
    out: list[WriteItem] = []
    for n, req in enumerate(requests):
        index = start + n
        try:
            out.append(
                prepare(index, req, caller, settings, pipeline, item_prefix(index, prefixed))
            )
        except Exception:  # the item is prepared again where its error can be raised
            return out, index
    return out, None


def prepare_in_thread(
    requests: Sequence[RememberRequest],
    caller: Caller,
    settings: Settings,
    start: int = 0,
    prefixed: bool = True,
) -> list[WriteItem]:
    """Items ``start`` and after, prepared in order in the calling thread; raises the first
    failing item's error."""
    pipeline = WritePipeline.for_settings(settings)
    return [
        prepare(i, requests[i], caller, settings, pipeline, item_prefix(i, prefixed))
        for i in range(start, len(requests))
    ]


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous ranges covering ``0..n``, sizes differing by at most one."""
    size, extra = divmod(n, shards)
    out, lo = [], 0
    for k in range(shards):
        hi = lo + size + (1 if k < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


_ALL_STARTED: Any = None  # in a worker: the barrier its warm-up task waits at


def _init_worker(started: Any) -> None:
    """A worker's start: Ctrl-C is for the server (the terminal sends SIGINT to the whole
    process group; a worker interrupted mid-shard would send ``KeyboardInterrupt`` back into
    the server's event loop), and the warm-up's barrier is kept."""
    global _ALL_STARTED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _ALL_STARTED = started


def _warm() -> int:
    """A worker's first task: the write path is imported by then (this module's imports).
    It holds the worker until every worker has one (a barrier of ``processes``), so each
    warm-up answers from a different worker; its pid says which."""
    _ALL_STARTED.wait(WARM_TIMEOUT_S)
    return os.getpid()


class TextWorkers:
    """The pool of text worker processes (see the module docstring)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._warming: list[concurrent.futures.Future[int]] = []
        # The warm-up's barrier, kept past the pool's end: a worker still starting reads it
        # from this process (a named semaphore), and one released with the pool was gone,
        # so each such worker died with a traceback (FileNotFoundError).
        self._started: Any = None
        self._failed_starts = 0  # pools in a row that broke before they were ready

    @property
    def ready(self) -> bool:
        """True once every worker of the running pool has answered its warm-up task (and
        still after it breaks: a warm-up's answer stays)."""
        return (
            self._pool is not None
            and len(self._warming) == self.processes
            and all(f.done() and not _warm_failed(f) for f in self._warming)
        )

    @property
    def disabled(self) -> bool:
        """No pool will start: no workers asked for, or ``MAX_FAILED_STARTS`` in a row
        broke before they were ready."""
        return self.processes <= 0 or self._failed_starts >= MAX_FAILED_STARTS

    def start(self) -> None:
        """Spawn the workers and warm them, in the background (no-op without workers, when
        started, or when disabled). A pool that cannot start (the operating system refuses
        a pipe or a process) is logged and counts as a failed start: batches are prepared
        here."""
        if self.disabled or self._pool is not None:
            return
        ctx = multiprocessing.get_context("spawn")
        pool: concurrent.futures.ProcessPoolExecutor | None = None
        try:
            self._started = ctx.Barrier(self.processes)
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.processes,
                mp_context=ctx,
                initializer=_init_worker,
                initargs=(self._started,),
            )
            warming = [pool.submit(_warm) for _ in range(self.processes)]
        except Exception as error:  # OSError (EMFILE, EAGAIN), a broken pool
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            self._failed_starts += 1
            log.warning("text_workers_unavailable", extra={"error": type(error).__name__})
            return
        self._pool, self._warming = pool, warming

    def close(self) -> None:
        """Stop the workers (queued shards are cancelled). A pool that had answered starts
        the count of failed starts again. A warm-up waiting at the barrier for one that was
        cancelled stops waiting (the barrier is aborted), so no worker outlives the pool by
        ``WARM_TIMEOUT_S``."""
        if self.ready:
            self._failed_starts = 0
        pool, self._pool, self._warming = self._pool, None, []
        if pool is not None:
            self._started.abort()
            pool.shutdown(wait=False, cancel_futures=True)

    async def prepare_batch(
        self, requests: Sequence[RememberRequest], caller: Caller, settings: Settings
    ) -> list[WriteItem]:
        """Every item of a batch prepared, in order (``items.N.`` names its fields); raises
        the first failing item's error, as ``prepare_in_thread`` does."""
        out: list[WriteItem] = []
        for hi, (items, failed) in await self._shards(requests, caller, settings, True):
            out += items
            if failed is not None:
                # Raises at ``failed`` (the item's own error); prepares the rest if not.
                out += await asyncio.to_thread(
                    prepare_in_thread, requests[:hi], caller, settings, failed
                )
        return out

    async def prepare_each(
        self, requests: Sequence[RememberRequest], caller: Caller, settings: Settings
    ) -> list[WriteItem | None]:
        """Each item prepared, in order, or None where it was refused (invalid input, outside
        the key's reach): an import's lines, each counted on its own. Any other error is
        raised. Fields are named as sent (no ``items.N.``)."""
        out: list[WriteItem | None] = []
        for hi, (items, failed) in await self._shards(requests, caller, settings, False):
            out += items
            while failed is not None:
                try:
                    # Raises the item's own error (the shard only said where it stopped).
                    out += await asyncio.to_thread(
                        prepare_in_thread, requests[: failed + 1], caller, settings, failed, False
                    )
                except (CtxpackError, ValidationError):
                    out.append(None)
                items, failed = await asyncio.to_thread(
                    prepare_shard, failed + 1, requests[failed + 1 : hi], caller, settings, False
                )
                out += items
        return out

    async def _shards(
        self,
        requests: Sequence[RememberRequest],
        caller: Caller,
        settings: Settings,
        prefixed: bool,
    ) -> list[tuple[int, Shard]]:
        """Each shard's end and what ``prepare_shard`` made of it, in order: one shard, in
        the thread, for a small batch or while the workers are not ready (starting them);
        else one for the thread and one per worker, at once."""
        pool = self._pool
        if pool is not None and not self.ready:
            broken = next((_error_of(f) for f in self._warming if _warm_failed(f)), None)
            if broken is not None:  # a worker died before it answered
                self._failed(pool, broken)
                pool = self._pool
        if len(requests) < SHARD_MIN_ITEMS or pool is None or not self.ready:
            if len(requests) >= SHARD_MIN_ITEMS:
                self.start()
            whole = await asyncio.to_thread(prepare_shard, 0, requests, caller, settings, prefixed)
            return [(len(requests), whole)]
        bounds = shard_bounds(len(requests), self.processes + 1)
        loop = asyncio.get_running_loop()

        async def remote(lo: int, hi: int) -> Shard:
            try:
                return await loop.run_in_executor(
                    pool, prepare_shard, lo, requests[lo:hi], caller, settings, prefixed
                )
            except asyncio.CancelledError as error:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # the request itself was cancelled
                self._failed(pool, error)  # the pool's shutdown cancelled the shard
                return [], lo
            except Exception as error:  # the pool's, never prepare's (prepare_shard keeps it)
                self._failed(pool, error)
                return [], lo

        others = [asyncio.ensure_future(remote(lo, hi)) for lo, hi in bounds[1:]]
        lo, hi = bounds[0]
        first = await asyncio.to_thread(
            prepare_shard, lo, requests[lo:hi], caller, settings, prefixed
        )
        shards = [first, *await asyncio.gather(*others)]
        return [(hi, shard) for (_, hi), shard in zip(bounds, shards, strict=True)]

    def _failed(self, pool: concurrent.futures.ProcessPoolExecutor, error: BaseException) -> None:
        """A shard's hand-over or a warm-up failed (an error of the pool's, never of
        ``prepare``; raised at submission once the pool knows a worker died, or by the
        future before): the shard is prepared here. A dead worker (``BrokenProcessPool``)
        or a failed warm-up ends the pool; a new one starts at the next large batch, unless
        ``MAX_FAILED_STARTS`` pools in a row broke before they were ready."""
        log.warning("text_worker_failed", extra={"error": type(error).__name__})
        if self._pool is not pool:
            return
        warm_failed = any(_warm_failed(f) for f in self._warming)
        if isinstance(error, BrokenProcessPool) or warm_failed:
            if not self.ready:
                self._failed_starts += 1
                if self.disabled:
                    log.warning("text_workers_disabled", extra={"failed_starts": MAX_FAILED_STARTS})
            self.close()


def _warm_failed(future: concurrent.futures.Future[int]) -> bool:
    """Whether a warm-up future ended without an answer (its worker died, it was cancelled,
    or its barrier broke)."""
    return future.done() and (future.cancelled() or future.exception() is not None)


def _error_of(future: concurrent.futures.Future[int]) -> BaseException:
    """What a failed warm-up future ended with."""
    if future.cancelled():
        return concurrent.futures.CancelledError()
    error = future.exception()
    assert error is not None
    return error
