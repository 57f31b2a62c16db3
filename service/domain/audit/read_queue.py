"""The read-audit queue (``read_audit = queued``): read calls hand their audit row to a
bounded queue in the process instead of inserting it in their own transaction, and one
background task writes the queued rows in batches.

What a read call is: an operation the table declares ``read_only`` (context, wake, get,
list, recall of an artifact, tool results, assemble, replay), which changes nothing stored
but its audit row. Its audit context says so (``AuditContext.read_only``, set by the faces
from the operation table); a write call's row always stays in its own transaction, so no
write is ever acknowledged without its row.

The rules, in the order a row meets them:

- **Deferred until commit.** ``record()`` of a read call in a unit of work the call runner
  opened (``attach``) keeps the row on the session, already redacted and with the id the
  answer carries (``AuditContext.audit_id``, generated in the process). The runner hands the
  rows to the queue once the call's transaction has committed (``Deferred.commit``) and drops
  them when it rolls back (``Deferred.discard``), so a call that fails after recording leaves
  only its failure row, as inline.
- **Backpressure, never a drop.** Each deferred row holds a place in the queue from
  ``record()`` on (``reserve``). When the queue is full (``read_audit_queue_rows``, counting
  the places held by calls not yet committed), or its writer is not running, the call writes
  its row inline, in its own transaction, exactly as ``inline`` does.
- **Batches.** The writer wakes when a row arrives, waits up to ``read_audit_flush_ms`` for
  ``read_audit_batch_rows`` rows, and writes what it has with one multi-row INSERT per batch
  (``AuditRepository.record_queued``), committed asynchronously like a read call's own row.
  On Citus (audit rows distributed by ``org_id``) a batch is written as one INSERT and one
  transaction per org: each then goes to a single shard and commits there in one phase,
  where a batch across orgs would be a multi-shard transaction (two-phase commit across the
  workers), and a failure stays within one org's rows.
- **Retries.** A failed INSERT is retried once; when it fails again and the database still
  answers, its rows are written one by one, each failure logged without content (id, org,
  action, error class). A row the database refuses on its own is kept and tried again on
  the next passes, up to ``MAX_ROW_ATTEMPTS``, then logged as dropped: the only way a queued
  row is lost short of the process dying. While the database does not answer, the rows stay
  queued and the writer backs off (up to ``MAX_BACKOFF_SECONDS``); the queue fills, and read
  calls write inline again (and fail as any call then does).
- **Timestamps.** A queued row is stamped with the database's clock at the batch minus the
  row's age (the monotonic time since ``record()``), so it sorts where an inline row recorded
  at that moment would; its ``latency_ms`` is measured at ``record()``, as inline.
- **Read your audit** (``settle``). Every reader of the trail in a unit of work of this
  process (audit list and get, replay, the console's audit pages and overview, export, and
  the erasures calls make: ``erase_from_trail``, ``domain/erase.py:scrub_trail``; not the
  expiry job, which runs outside any call's unit of work) first writes its own call's
  deferred rows into its own transaction and waits until every row queued before it is in
  the table. Another process sees a queued row once its batch commits: normally within
  ``read_audit_flush_ms`` plus one INSERT, later while the database refuses writes.
- **Shutdown drains.** ``close()`` (run when the resources close: the app's lifespan, any
  CLI command) stops taking rows, waits for the calls that still hold places, and writes
  everything queued; it gives up only after ``DRAIN_SECONDS`` of a database that does not
  answer, logging the ids it could not write.

A process crash (kill -9) loses the rows still queued, at most a few ms of read calls in
normal running; inline, a read call's row commits asynchronously and a database crash can
lose its last few hundred ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.errors import ServiceUnavailable
from service.store.audit import AuditRepository, uuid_array_text

log = logging.getLogger("ctxpack.audit")

# A failed batch is tried this many times as a whole before its rows go one by one.
BATCH_ATTEMPTS = 2
RETRY_PAUSE_SECONDS = 0.05
# A row the database refuses on its own (while it writes others) is dropped after this many
# passes, with an error log: the one way a queued row is lost while the process lives.
MAX_ROW_ATTEMPTS = 5
MAX_BACKOFF_SECONDS = 1.0
# How long close() keeps trying a database that does not answer before it gives up.
DRAIN_SECONDS = 30.0

_SESSION_KEY = "ctxpack.read_audit"
WRITE_ERRORS = (SQLAlchemyError, OSError)


@dataclass
class QueuedRow:
    """One read call's audit row, as ``AuditRepository.record_queued`` takes it."""

    values: dict[str, Any]
    recorded: float = field(default_factory=time.monotonic)
    attempts: int = 0

    @property
    def org_id(self) -> uuid.UUID:
        org_id: uuid.UUID = self.values["org_id"]
        return org_id

    def row(self, now: float) -> dict[str, Any]:
        return {**self.values, "age_seconds": max(0.0, now - self.recorded)}

    def describe(self) -> dict[str, Any]:
        """What a log line may say of the row: never its request or details."""
        return {
            "audit_id": str(self.values["id"]),
            "org_id": str(self.values["org_id"]),
            "action": self.values["action"],
        }


def queued_row(values: dict[str, Any]) -> QueuedRow:
    """A row of ``record_call``'s columns, frozen as it is now: later changes to the call's
    request or details (a failure row pops ``name``) never reach it."""
    frozen = dict(values)
    frozen["request"] = _json_text(values["request"])
    frozen["details"] = _json_text(values["details"])
    frozen["memory_ids"] = uuid_array_text(list(values["memory_ids"]))
    return QueuedRow(frozen)


def _json_text(value: dict[str, Any]) -> str:
    # What the JSONB column's bind would send (SQLAlchemy's default serializer), now.
    return json.dumps(value)


class ReadAuditQueue:
    """The process's queue of read calls' audit rows and its writer. See the module
    docstring. Built and run by ``service/resources.py:open_resources`` (``running``)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        capacity: int,
        batch_rows: int,
        flush_seconds: float,
        per_org: bool,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.capacity = capacity
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.per_org = per_org
        self.rows: deque[QueuedRow] = deque()
        self.reserved = 0
        self.written = 0
        self.dropped = 0
        self._lock = asyncio.Lock()  # one writer at a time: the task, a flush or the drain
        self._arrived = asyncio.Event()
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # --- taking rows ----------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stopping

    def reserve(self) -> bool:
        """Hold a place for one row of a call not yet committed; False when the queue is
        full or not running (the call then writes its row inline)."""
        if not self.accepting or len(self.rows) + self.reserved >= self.capacity:
            return False
        self.reserved += 1
        return True

    def release(self, count: int) -> None:
        """Give back the places of rows that will never come (their call rolled back, or
        wrote them into its own transaction)."""
        self.reserved -= count

    def submit(self, rows: Iterable[QueuedRow]) -> None:
        """Queue rows whose places were reserved (their call has committed)."""
        for row in rows:
            self.reserved -= 1
            self.rows.append(row)
        if self.rows:
            self._arrived.set()
            if len(self.rows) >= self.batch_rows:
                self._full.set()

    # --- writing --------------------------------------------------------------------------

    async def flush(self) -> None:
        """Return once every row queued before the call is written (or, for a row the
        database refuses on its own, put back for a later pass). The writing runs shielded:
        a reader cancelled meanwhile never cuts a batch in half.

        Raises:
            ServiceUnavailable: the database answers no statement (the rows stay queued).
        """
        if not self.rows and not self._lock.locked():
            return
        await asyncio.shield(self._write_queued())

    async def _write_queued(self) -> int:
        async with self._lock:
            return await self._write(len(self.rows))

    async def _write(self, count: int) -> int:
        """Write the first ``count`` queued rows, ``batch_rows`` at a time (lock held).
        Returns how many the database refused one by one (put back or dropped)."""
        refused = 0
        while count > 0 and self.rows:
            take = min(count, self.batch_rows, len(self.rows))
            count -= take
            batch = [self.rows.popleft() for _ in range(take)]
            groups: dict[uuid.UUID | None, list[QueuedRow]] = {}
            for row in batch:
                groups.setdefault(row.org_id if self.per_org else None, []).append(row)
            pending = list(groups.values())
            failed: list[QueuedRow] = []
            try:
                while pending:
                    failed += await self._write_group(pending[0])
                    pending.pop(0)
            finally:
                # Whatever was not written (the database went away, or anything else
                # raised) goes back to the front of the queue, in order.
                self.rows.extendleft(reversed([r for g in pending for r in g]))
                self._put_back(failed)
                refused += len(failed)
        if not self.rows:
            self._arrived.clear()
        if len(self.rows) < self.batch_rows:
            self._full.clear()
        return refused

    async def _write_group(self, group: list[QueuedRow]) -> list[QueuedRow]:
        """Write one group (a batch, or an org's part of it on Citus) with one INSERT,
        retried; then row by row. Returns the rows the database refused one by one.

        Raises:
            ServiceUnavailable: nothing written and the database answers no statement.
        """
        if await self._insert_retrying(group):
            return []
        if not await self._answers():
            raise ServiceUnavailable("the database does not answer; audit rows kept queued")
        failed: list[QueuedRow] = []
        for row in group:
            try:
                await self._insert([row])
            except WRITE_ERRORS as exc:
                log.warning(
                    "read_audit_row_failed", extra={**row.describe(), "error": type(exc).__name__}
                )
                failed.append(row)
        return failed

    async def _insert_retrying(self, rows: list[QueuedRow]) -> bool:
        for attempt in range(BATCH_ATTEMPTS):
            try:
                await self._insert(rows)
                return True
            except WRITE_ERRORS as exc:
                log.warning(
                    "read_audit_batch_failed",
                    extra={"rows": len(rows), "attempt": attempt + 1, "error": type(exc).__name__},
                )
                if attempt + 1 < BATCH_ATTEMPTS:
                    await asyncio.sleep(RETRY_PAUSE_SECONDS)
        return False

    async def _insert(self, rows: list[QueuedRow]) -> None:
        async with self.sessionmaker() as session:
            now = time.monotonic()
            repo = AuditRepository(session)
            await repo.commit_asynchronously()
            await repo.record_queued([r.row(now) for r in rows])
            await session.commit()
        self.written += len(rows)

    async def _answers(self) -> bool:
        try:
            async with self.sessionmaker() as session:
                await AuditRepository(session).db_now()
            return True
        except WRITE_ERRORS:
            return False

    def _put_back(self, failed: list[QueuedRow]) -> None:
        """Rows the database refused one by one while it answers: tried again later, up to
        ``MAX_ROW_ATTEMPTS`` passes, then dropped with an error log."""
        kept: list[QueuedRow] = []
        for row in failed:
            row.attempts += 1
            if row.attempts >= MAX_ROW_ATTEMPTS:
                self.dropped += 1
                log.error("read_audit_row_dropped", extra=row.describe())
            else:
                kept.append(row)
        self.rows.extend(kept)

    # --- the writer task ------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.0
        while not self._stopping:
            await self._arrived.wait()
            if self._stopping:
                return
            if len(self.rows) < self.batch_rows:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.flush_seconds)
            try:
                refused = await self._write_queued()
            except ServiceUnavailable:
                refused = -1
            if refused == 0:
                backoff = 0.0
                continue
            # The database refused rows, or answers nothing: try again later, not at once.
            backoff = min(MAX_BACKOFF_SECONDS, max(RETRY_PAUSE_SECONDS, backoff * 2))
            if refused < 0:
                log.warning(
                    "read_audit_unavailable",
                    extra={"queued": len(self.rows), "retry_in_s": backoff},
                )
            await asyncio.sleep(backoff)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ReadAuditQueue]:
        """Run the writer while the block runs; drain the queue when it ends."""
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="read-audit-writer")
        try:
            yield self
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop taking rows, then write every row queued or still held by a call that has
        not committed yet (see the module docstring)."""
        self._stopping = True
        self._arrived.set()
        self._full.set()
        if self._task is not None:
            # A writer that died of an unexpected error already logged it (asyncio); the
            # drain below writes what it left.
            with contextlib.suppress(Exception):
                await self._task
        deadline = time.monotonic() + DRAIN_SECONDS
        backoff = RETRY_PAUSE_SECONDS
        while (self.rows or self.reserved > 0) and time.monotonic() < deadline:
            try:
                await self.flush()
            except ServiceUnavailable:
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                continue
            if self.reserved > 0 and not self.rows:
                await asyncio.sleep(0.01)  # a call between record() and its commit
        if self.rows:
            log.error(
                "read_audit_rows_unwritten",
                extra={
                    "rows": len(self.rows),
                    "audit_ids": [str(r.values["id"]) for r in self.rows],
                },
            )


# --- a unit of work's deferred rows ----------------------------------------------------------


@dataclass
class Deferred:
    """The rows a unit of work recorded for the queue, waiting for its commit."""

    queue: ReadAuditQueue
    rows: list[QueuedRow] = field(default_factory=list)

    def commit(self) -> None:
        """The call's transaction committed: queue its rows."""
        rows, self.rows = self.rows, []
        self.queue.submit(rows)

    def discard(self) -> None:
        """The call's transaction rolled back: its rows never existed."""
        self.queue.release(len(self.rows))
        self.rows = []


def attach(session: AsyncSession, queue: ReadAuditQueue) -> Deferred:
    """Let read calls in ``session`` defer their rows to ``queue`` (the call runner's unit of
    work does this, and commits or discards the returned ``Deferred`` with the session)."""
    deferred = Deferred(queue)
    session.info[_SESSION_KEY] = deferred
    return deferred


def deferred_of(session: AsyncSession) -> Deferred | None:
    """The deferred rows of ``session``'s unit of work; None when it defers none."""
    deferred: Deferred | None = session.info.get(_SESSION_KEY)
    return deferred


async def settle(session: AsyncSession) -> None:
    """Before reading or rewriting the audit trail in ``session``: write the call's own
    deferred rows into its transaction, then wait for every row queued before now.

    Raises:
        ServiceUnavailable: the queue's writer cannot reach the database.
    """
    deferred = deferred_of(session)
    if deferred is None:
        return
    if deferred.rows:
        rows, deferred.rows = deferred.rows, []
        deferred.queue.release(len(rows))
        now = time.monotonic()
        await AuditRepository(session).record_queued([r.row(now) for r in rows])
    await deferred.queue.flush()
