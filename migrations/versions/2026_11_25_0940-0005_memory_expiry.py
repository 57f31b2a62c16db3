"""memory expiry: memories.expires_at and the expiry job's partial index

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_memories_expires_at",
        "memories",
        ["expires_at"],
        unique=False,
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_memories_expires_at",
        table_name="memories",
        postgresql_where=sa.text("expires_at IS NOT NULL"),
    )
    op.drop_column("memories", "expires_at")
