"""vectors are indexed per big namespace: the table-wide HNSW index goes

One HNSW graph over every org's memories answered each scope with a filter, whose cost grows
with the inverse of the scope's share of the table, and every write paid an insertion into
it. Big namespaces now get a partial HNSW (and GIN) index of their own, built and dropped by
the namespace index job (service/store/namespace_indexes.py); small namespaces are scanned
exactly, as they already were. Until the job has built a big namespace's indexes (it runs
at start-up, then every ``CTXPACK_NAMESPACE_INDEX_INTERVAL_SECONDS``), its scopes are
scanned exactly: the same packs, slower.

Citus propagates ``DROP INDEX`` on a distributed table to its shards.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 09:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memories_embedding_hnsw")


def downgrade() -> None:
    op.create_index(
        "ix_memories_embedding_hnsw",
        "memories",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
