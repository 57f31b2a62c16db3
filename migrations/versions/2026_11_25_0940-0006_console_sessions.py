"""console sessions: one row per signed-in console browser; memory indexes for its pages

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("org_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("key_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id", "key_id"],
            ["api_keys.org_id", "api_keys.id"],
            name=op.f("fk_console_sessions_org_id_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_console_sessions")),
    )
    op.create_index(
        "ix_console_sessions_token_hash", "console_sessions", ["token_hash"], unique=True
    )
    op.create_index(
        "ix_console_sessions_org_id_key_id", "console_sessions", ["org_id", "key_id"], unique=False
    )
    # The console's pages at 100k memories (bench/console_bench.py): newest-first listing,
    # counts by type, supersession chains walked backwards.
    op.create_index(
        "ix_memories_org_id_created_at", "memories", ["org_id", "created_at"], unique=False
    )
    op.create_index("ix_memories_org_id_type", "memories", ["org_id", "type"], unique=False)
    # GET /v1/memories?namespace=u:* and the console's subtree filters: LIKE 'u:%' needs the
    # pattern opclass whatever the database's collation.
    op.create_index(
        "ix_memories_org_id_namespace_pattern",
        "memories",
        ["org_id", "namespace"],
        unique=False,
        postgresql_ops={"namespace": "varchar_pattern_ops"},
    )
    op.create_index(
        "ix_memories_org_id_superseded_by",
        "memories",
        ["org_id", "superseded_by"],
        unique=False,
        postgresql_where=sa.text("superseded_by IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_org_id_superseded_by", table_name="memories")
    op.drop_index("ix_memories_org_id_namespace_pattern", table_name="memories")
    op.drop_index("ix_memories_org_id_type", table_name="memories")
    op.drop_index("ix_memories_org_id_created_at", table_name="memories")
    op.drop_index("ix_console_sessions_org_id_key_id", table_name="console_sessions")
    op.drop_index("ix_console_sessions_token_hash", table_name="console_sessions")
    op.drop_table("console_sessions")
