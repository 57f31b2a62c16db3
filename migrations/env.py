"""Alembic environment: migrates the database ctxpack's settings point at.

The URL is taken, in order, from ``config.attributes["connection"]`` (a live connection handed
in by ctxpack), the ``sqlalchemy.url`` option (set by ``service.store.database.alembic_config``),
or the settings (external URL or the embedded server).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from service.store.models import Base

config = context.config
target_metadata = Base.metadata


def _include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # The generated tsvector column is compared by its expression text, which Postgres
    # normalises differently from ours; its definition lives in the migration.
    return True


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        include_object=_include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        from service.config import Settings
        from service.store.database import resolve_database_url, sync_url

        url = sync_url(resolve_database_url(Settings()))
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("ctxpack migrations run online only (ctxpack db upgrade)")
run_migrations_online()
