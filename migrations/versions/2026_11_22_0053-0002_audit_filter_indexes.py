"""audit filter indexes: by key, and by namespace prefix

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 00:53:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_audit_events_org_id_key_id_created_at",
        "audit_events",
        ["org_id", "key_id", "created_at"],
        unique=False,
    )
    # GET /v1/audit?namespace=alice matches namespace = 'alice' OR LIKE 'alice:%'; the
    # pattern opclass serves LIKE prefixes whatever the database's collation.
    op.create_index(
        "ix_audit_events_org_id_namespace",
        "audit_events",
        ["org_id", "namespace"],
        unique=False,
        postgresql_ops={"namespace": "varchar_pattern_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_audit_events_org_id_namespace", table_name="audit_events")
    op.drop_index("ix_audit_events_org_id_key_id_created_at", table_name="audit_events")
