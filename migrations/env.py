"""Alembic environment: migrates the database ctxpack's settings point at.

The URL is taken, in order, from ``config.attributes["connection"]`` (a live connection handed
in by ctxpack), the ``sqlalchemy.url`` option (set by ``service.store.database.alembic_config``),
or the settings (external URL or the embedded server).

On a Citus coordinator, every run ends by distributing what is not yet distributed
(``service.store.distribution``: reference tables, then every org-scoped table by org_id),
in transactions of its own after the migrations committed; on plain PostgreSQL that step
does nothing.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from service.store.distribution import distribute, sequential_shard_commands
from service.store.models import Base
from service.store.namespace_indexes import PREFIX as NAMESPACE_INDEX_PREFIX

config = context.config
target_metadata = Base.metadata


def _include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # A big namespace's own indexes are made and dropped at run time, not by migrations
    # (service/store/namespace_indexes.py).
    return not (type_ == "index" and reflected and str(name).startswith(NAMESPACE_INDEX_PREFIX))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        include_object=_include_object,
    )
    with context.begin_transaction():
        # A migration that leaves the transaction (``autocommit_block``) sets it again on
        # the one that follows (migration 0010).
        sequential_shard_commands(connection)
        context.run_migrations()
    if connection.in_transaction():
        connection.commit()
    distribute(connection.execution_options(isolation_level="AUTOCOMMIT"), target_metadata)


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
