"""The process's resources, built once: ``open_resources(settings)``.

Every face of ctxpack runs on one ``Resources`` object, opened by one function: the HTTP
app's lifespan (which also serves MCP at /mcp), ``ctxpack mcp`` over stdio, ``ctxpack audit``
and every other CLI command. It is the MCP SDK's typed lifespan context applied to the whole
process: a dataclass whose fields say what exists, never a string-keyed dict.

What it holds:

- ``citus``: the database is a Citus coordinator (every pool then plans per call; see
  ``store.database.create_engine``);
- ``engine`` / ``sessionmaker``: the pool every write and read goes through;
- ``pack_engine`` / ``pack_sessionmaker``: the context packs' pool (generic plans,
  autocommit; see ``store.database.create_engine``);
- ``read_sessionmaker`` / ``read_pack_sessionmaker``: with ``read_database_url``, sessions
  that read on the streaming replica and write (their audit rows) on the primary, for
  memory lists and context packs (``store.database.ReplicaSession``); None without one;
- ``embedder``: the model, behind ``AsyncEmbedder`` (worker threads, bounded concurrency),
  checked against the embedding column's width at start;
- ``callers``: the caller cache, kept exact by the key-revocation listener that
  ``open_resources`` runs while the resources are open (``listen=True``);
- ``sign_in_limiter``: the console's sign-in attempts per client address (same backend);
- ``limiter``: the per-key rate limiter (in the database, shared by every process, or in
  this one: ``rate_limit_backend``), or None when ``rate_limit_per_minute`` is 0;
- ``pipeline``: the write pipeline (one ``Redactor`` and one ``WriteGate``, shared by every
  write);
- ``text_workers``: the processes that prepare a large batch's items beside the worker
  thread (``domain/writes/text_workers.py``); the HTTP server starts them with its
  resources, other faces at their first large batch; stopped when the resources close;
- ``read_audit``: with ``read_audit = queued``, the read-audit queue and its writer task
  (``domain/audit/read_queue.py``), on the primary's pool; drained when the resources
  close, before the pools are disposed of. None with ``inline`` (the default);
- ``runner``: the call runner (``service.calls``) bound to these resources.

Opening builds nothing per call; closing stops the listener and disposes of every pool.
A CLI command that needs no model opens with ``load_embedder=False`` (then ``embedder``
raises if used); one that runs before the schema exists (``ctxpack db``) opens with
``check_schema=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio.to_thread
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.domain.audit import ReadAuditQueue
from service.domain.caller_cache import CallerCache
from service.domain.rate_limit import Limiter, RateLimiter, SharedRateLimiter
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.text_workers import TextWorkers, workers_for
from service.embedding import AsyncEmbedder, Embedder, build_embedder
from service.errors import ServiceUnavailable
from service.store import probes
from service.store.database import (
    create_engine,
    libpq_url,
    make_replica_sessionmaker,
    make_sessionmaker,
    resolve_database_url,
)
from service.store.revocations import RevocationListener

if TYPE_CHECKING:
    from service.calls import CallRunner


@dataclass
class Resources:
    """Everything built once per process. See the module docstring."""

    settings: Settings
    database_url: str
    citus: bool
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    pack_engine: AsyncEngine
    pack_sessionmaker: async_sessionmaker[AsyncSession]
    callers: CallerCache
    limiter: Limiter | None
    pipeline: WritePipeline
    text_workers: TextWorkers
    sign_in_limiter: Limiter | None = None
    read_sessionmaker: async_sessionmaker[AsyncSession] | None = None
    read_pack_sessionmaker: async_sessionmaker[AsyncSession] | None = None
    model: Embedder | None = None
    read_audit: ReadAuditQueue | None = None
    _embedder: AsyncEmbedder | None = field(default=None, repr=False)
    _runner: CallRunner | None = field(default=None, repr=False)

    @property
    def embedder(self) -> AsyncEmbedder:
        """The model. Raises when the resources were opened without it."""
        if self._embedder is None:
            raise ServiceUnavailable("this command opened the database without the model")
        return self._embedder

    @property
    def has_embedder(self) -> bool:
        return self._embedder is not None

    async def ping(self) -> None:
        """One round trip to the database (the readiness probe); raises when it does not
        answer."""
        await probes.ping(self.engine)

    @property
    def runner(self) -> CallRunner:
        """The call runner on these resources (``service.calls``)."""
        if self._runner is None:
            from service.calls import CallRunner

            self._runner = CallRunner(self)
        return self._runner


async def resolve_url(settings: Settings) -> str:
    """The database URL of ``settings``, starting the embedded Postgres if it is the one
    (in a worker thread: it may take seconds)."""
    return await anyio.to_thread.run_sync(resolve_database_url, settings)


@contextlib.asynccontextmanager
async def open_resources(
    settings: Settings,
    *,
    database_url: str | None = None,
    embedder: Embedder | None = None,
    load_embedder: bool = True,
    check_schema: bool = True,
    listen: bool = True,
) -> AsyncIterator[Resources]:
    """Open the process's resources, and close them on exit.

    Args:
        settings: every knob.
        database_url: an already-resolved URL; else resolved from ``settings`` (which may
            start the embedded Postgres).
        embedder: an already-built model (tests pass a fake); else built from ``settings``
            when ``load_embedder``.
        load_embedder: False for commands that never embed (keys, audit, db).
        check_schema: check that the schema exists and that its embedding column matches the
            model (start-up fails with ``ServiceUnavailable`` otherwise).
        listen: run the key-revocation listener that keeps the caller cache exact (servers;
            a one-shot command has no use for it, and its cache then never answers).

    Raises:
        ServiceUnavailable: no schema, or a model whose width differs from the column's.
    """
    url = database_url or await resolve_url(settings)
    citus = await probes.has_citus(libpq_url(url))
    engine = create_engine(url, settings, citus=citus)
    pack_engine = create_engine(url, settings, generic_plans=True, citus=citus)
    replica = settings.read_database_url
    # The replica's pools: lists (custom plans) and packs (generic plans), both autocommit:
    # a hot standby runs read-only transactions, and these sessions only read there.
    read_engine = (
        create_engine(replica, settings, autocommit=True, citus=citus) if replica else None
    )
    read_pack_engine = (
        create_engine(replica, settings, generic_plans=True, citus=citus) if replica else None
    )
    try:
        model = embedder
        if model is None and load_embedder:
            model = await anyio.to_thread.run_sync(build_embedder, settings)
        resources = Resources(
            settings=settings,
            database_url=url,
            citus=citus,
            engine=engine,
            sessionmaker=make_sessionmaker(engine),
            pack_engine=pack_engine,
            pack_sessionmaker=make_sessionmaker(pack_engine),
            callers=CallerCache(settings.auth_cache_seconds),
            limiter=_limiter(
                settings, pack_engine, settings.rate_limit_per_minute, settings.rate_limit_burst
            ),
            sign_in_limiter=_limiter(
                settings,
                pack_engine,
                settings.console_sign_in_per_minute,
                settings.console_sign_in_burst,
            ),
            pipeline=WritePipeline.for_settings(settings),
            text_workers=TextWorkers(workers_for(settings)),
            read_sessionmaker=(
                make_replica_sessionmaker(read_engine, engine) if read_engine else None
            ),
            read_pack_sessionmaker=(
                make_replica_sessionmaker(read_pack_engine, pack_engine)
                if read_pack_engine
                else None
            ),
            model=model,
            _embedder=(
                AsyncEmbedder(model, settings.embed_concurrency, settings.query_cache_size)
                if model is not None
                else None
            ),
        )
        if check_schema:
            await _check_schema(resources)
        async with contextlib.AsyncExitStack() as stack:
            if listen and resources.callers.ttl > 0:
                await stack.enter_async_context(_revocation_listener(resources))
            if settings.read_audit == "queued":
                resources.read_audit = await stack.enter_async_context(
                    _read_audit_queue(resources).running()
                )
            stack.callback(resources.text_workers.close)
            yield resources
    finally:
        for each in (engine, pack_engine, read_engine, read_pack_engine):
            if each is not None:
                await each.dispose()


def _limiter(
    settings: Settings, autocommit_engine: AsyncEngine, per_minute: int, burst: int
) -> Limiter | None:
    if per_minute <= 0:
        return None
    if settings.rate_limit_backend == "memory":
        return RateLimiter(per_minute, burst)
    return SharedRateLimiter(autocommit_engine, per_minute, burst)


def _read_audit_queue(resources: Resources) -> ReadAuditQueue:
    """The read-audit queue on the primary's pool. On Citus each org's rows of a batch are
    one INSERT and one transaction (one shard, one-phase commit)."""
    settings = resources.settings
    return ReadAuditQueue(
        resources.sessionmaker,
        capacity=settings.read_audit_queue_rows,
        batch_rows=settings.read_audit_batch_rows,
        flush_seconds=settings.read_audit_flush_ms / 1000,
        per_org=resources.citus,
    )


async def _check_schema(resources: Resources) -> None:
    dims = await probes.embedding_dims(resources.engine)
    if dims is None:
        raise ServiceUnavailable("the database has no ctxpack schema: run `ctxpack db upgrade`")
    if resources.model is not None and dims != resources.model.dims:
        raise ServiceUnavailable(
            f"embedding column holds {dims} dims, embedder returns {resources.model.dims}"
        )


@contextlib.asynccontextmanager
async def _revocation_listener(resources: Resources) -> AsyncIterator[None]:
    """The LISTEN connection that keeps ``resources.callers`` exact, for as long as the
    resources are open."""
    cache = resources.callers
    listener = RevocationListener(
        libpq_url(resources.database_url), cache.invalidate, cache.set_live
    )
    stop = asyncio.Event()
    task = asyncio.create_task(listener.run(stop), name="caller-cache-listener")
    try:
        yield
    finally:
        stop.set()
        # Never cancel a connect half-way (it would leave the connection open): a connecting
        # listener sees the stop flag as soon as it is connected, and closes.
        if not listener.connecting:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


__all__ = ["Resources", "open_resources", "resolve_url"]
