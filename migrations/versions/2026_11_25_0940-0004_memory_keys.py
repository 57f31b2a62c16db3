"""memory keys: an optional caller-chosen key, unique among an (org, namespace)'s current memories

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("key", sa.String(length=256), nullable=True))
    # Partial: superseded versions keep their key as history; only one current memory holds it.
    op.create_index(
        "ix_memories_org_id_namespace_key",
        "memories",
        ["org_id", "namespace", "key"],
        unique=True,
        postgresql_where=sa.text("key IS NOT NULL AND superseded_by IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_org_id_namespace_key", table_name="memories")
    op.drop_column("memories", "key")
