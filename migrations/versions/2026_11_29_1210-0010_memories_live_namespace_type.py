"""near-duplicate probes read only their own type's live rows: an index on (org_id,
namespace, type) over current memories

A batch's near-duplicate probe compares each item with the current memories of its
namespace and type (store/memories.py, ``near_lateral``). In a namespace scanned exactly it
walked ``ix_memories_org_id_namespace_pattern``, fetched every row of the namespace from
the heap and dropped the other types' (107 of 131 rows per probe at the bench's 100k
store). Through this index it fetches only the rows it compares: 500 probes took 73 ms
rather than 218 ms (EXPLAIN ANALYZE, same probes), and 0.16-0.27 s rather than 0.25-0.38 s
inside the bench's batches of 500, right after the model (runs alternated). A batch INSERT
of 500 rows pays 65.4 ms rather than 62.8 ms for the extra index (medians of 18,
alternated).

The index is built ``CONCURRENTLY``, outside the migration's transaction: writes go on while
it builds (``ctxpack db upgrade`` from 0009 took 8.9 s at the bench's 1M memories, 2.0 s
with nothing to do). A build that failed leaves an invalid index behind, which the next
upgrade drops and builds again. Citus propagates ``CREATE INDEX CONCURRENTLY`` on a
distributed table to its shards.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 12:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from service.store.distribution import sequential_shard_commands

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


NAME = "ix_memories_live_org_id_namespace_type"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        invalid = (
            op.get_bind()
            .execute(
                sa.text(
                    "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE c.relname = :name AND c.relnamespace = current_schema()::regnamespace "
                    "AND NOT i.indisvalid"
                ),
                {"name": NAME},
            )
            .first()
        )
        if invalid is not None:
            op.drop_index(NAME, table_name="memories", postgresql_concurrently=True)
        op.create_index(
            NAME,
            "memories",
            ["org_id", "namespace", "type"],
            unique=False,
            postgresql_where=sa.text("superseded_by IS NULL"),
            postgresql_concurrently=True,
            if_not_exists=True,
        )
    # The block committed the migration's transaction: the one it began in its place holds
    # the rest of this run's migrations, on Citus one connection per worker again.
    sequential_shard_commands(op.get_bind())


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index(NAME, table_name="memories", postgresql_concurrently=True, if_exists=True)
    sequential_shard_commands(op.get_bind())
