"""duplicates by reach: the content key includes project and agent diary, current rows only

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 09:40:00

The old key ``(org_id, namespace, content_hash)`` made a p1 write of a p2 memory's text a
"duplicate" of the p2 memory (leaking its id) and stored nothing for p1. The new unique index
is ``(org_id, namespace, project, agent_id, content_hash)`` with NULLs not distinct, over
current (not superseded) memories only. Existing rows satisfy it already (the old key was
stricter), so no data moves; a plain index keeps exact-duplicate probes, superseded rows
included, on an index.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_org_id_namespace_content_hash",
        "memories",
        ["org_id", "namespace", "content_hash"],
        unique=False,
    )
    op.create_index(
        "uq_memories_current_content",
        "memories",
        ["org_id", "namespace", "project", "agent_id", "content_hash"],
        unique=True,
        postgresql_nulls_not_distinct=True,
        postgresql_where=sa.text("superseded_by IS NULL"),
    )
    op.drop_constraint("uq_memories_org_id_namespace_content_hash", "memories", type_="unique")


def downgrade() -> None:
    # Fails (as it should) when the same text is now stored in two projects or diaries of
    # one namespace, or once superseded and once current: resolve those rows first.
    op.create_unique_constraint(
        "uq_memories_org_id_namespace_content_hash",
        "memories",
        ["org_id", "namespace", "content_hash"],
    )
    op.drop_index("uq_memories_current_content", table_name="memories")
    op.drop_index("ix_memories_org_id_namespace_content_hash", table_name="memories")
