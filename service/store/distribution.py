"""Citus: the schema distributed by org, done by the migration itself.

On a Citus coordinator (a database with the ``citus`` extension), ``distribute`` makes
- the tables read before an org is known **reference tables**, copied to every node:
  ``orgs`` (a name is looked up before its org), ``api_keys`` (a key is looked up by its
  hash) and ``console_sessions`` (by its cookie's hash);
- every other table that has an ``org_id`` column **distributed by ``org_id``**, colocated
  with ``memories``: every row of one org lives on one node, so a call, whose every
  statement says ``org_id = :org``, is routed whole to that node (a *router query*), and
  joins and foreign keys within an org stay local.

It runs after every ``alembic upgrade`` and ``downgrade`` (``migrations/env.py``), so a
table a later migration creates is distributed by the same rule, and it is idempotent:
tables already distributed (and those a downgrade dropped) are skipped. On plain
PostgreSQL it does nothing.

What a migration must not do, so that it runs on both: create a unique index or
constraint on a distributed table without ``org_id`` in it, add a foreign key between
distributed tables that does not include ``org_id`` on both sides, or rely on a sequence
or volatile default evaluated per shard. Citus propagates ``ALTER TABLE`` and
``CREATE INDEX`` on distributed tables to their shards.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, MetaData, text

log = logging.getLogger(__name__)

REFERENCE_TABLES = ("orgs", "api_keys", "console_sessions")
# The table every distributed one is colocated with (distributed first).
ANCHOR = "memories"
DISTRIBUTION_COLUMN = "org_id"


def has_citus(conn: Connection) -> bool:
    """True on a database with the ``citus`` extension (a coordinator)."""
    row = conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).first()
    return row is not None


def sequential_shard_commands(conn: Connection) -> None:
    """In a migration's transaction on a Citus coordinator: one connection per worker for the
    rest of it. Citus refuses DDL on an extension (and some on reference tables) after a
    parallel multi-shard command in the same transaction. Nothing on plain PostgreSQL."""
    if has_citus(conn):
        conn.execute(text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))


def _distributed(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND p.partmethod IN ('h', 'n')"
        )
    ).all()
    return {r[0] for r in rows}


def _existing(conn: Connection) -> set[str]:
    rows = conn.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    ).all()
    return {r[0] for r in rows}


def plan(metadata: MetaData) -> list[tuple[str, str]]:
    """``(table, how)`` in the order to apply: ``reference`` or ``distributed``, the
    reference tables first, then the anchor, then every other org-scoped table."""
    steps = [(name, "reference") for name in REFERENCE_TABLES]
    steps.append((ANCHOR, "distributed"))
    for table in metadata.sorted_tables:
        if table.name in REFERENCE_TABLES or table.name == ANCHOR:
            continue
        if DISTRIBUTION_COLUMN in table.c:
            steps.append((table.name, "distributed"))
    return steps


def distribute(conn: Connection, metadata: MetaData) -> list[str]:
    """Distribute what is not yet distributed (see the module docstring); ``conn`` must
    autocommit (each call moves a table's rows to its shards in its own transaction).

    Returns:
        The tables distributed by this call (empty on plain PostgreSQL or when done).
    """
    if not has_citus(conn):
        return []
    done = _distributed(conn)
    existing = _existing(conn)
    # The coordinator is in the metadata (its reference tables' placements are local):
    # a foreign key from a table still local to a new reference table would otherwise turn
    # that table into a "Citus local table" before it is distributed.
    conn.execute(text("SET citus.enable_local_reference_table_foreign_keys = off"))
    changed = []
    for name, how in plan(metadata):
        if name in done or name not in existing:
            continue
        if how == "reference":
            conn.execute(text("SELECT create_reference_table(:t)"), {"t": name})
        else:
            conn.execute(
                text("SELECT create_distributed_table(:t, :col, colocate_with => :with)"),
                {
                    "t": name,
                    "col": DISTRIBUTION_COLUMN,
                    "with": "default" if name == ANCHOR else ANCHOR,
                },
            )
        changed.append(name)
        log.info("citus_distributed", extra={"table": name, "as": how})
    conn.execute(text("RESET citus.enable_local_reference_table_foreign_keys"))
    return changed
