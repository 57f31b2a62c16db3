"""rate limit buckets: one token bucket per key, shared by every server process

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 10:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # UNLOGGED: a bucket is updated by every call and is worth no WAL flush; after a crash
    # the table is empty, and every key's bucket comes back full. No foreign key: a bucket
    # of a deleted key is never read again.
    op.create_table(
        "rate_limit_buckets",
        sa.Column("org_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("key_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("stamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "key_id", name=op.f("pk_rate_limit_buckets")),
        prefixes=["UNLOGGED"],
    )


def downgrade() -> None:
    op.drop_table("rate_limit_buckets")
