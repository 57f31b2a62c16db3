"""memories keep their vectors inline: toast_tuple_target 4096

A memory row is its 1,540-byte vector (384 floats) plus its text and a few columns: over
PostgreSQL's default 2 kB toast threshold for most memories, so the vector (pgvector's type
has EXTERNAL storage) went to the TOAST table, and every exact scan and every re-rank read
two pages per row (260 MB of TOAST for 220k rows). At 4096 a row is toasted only when its
text is long, and then the text, the largest column, goes first: the vector stays in the
heap. Rows stored before this migration keep their TOASTed vectors until rewritten
(``VACUUM FULL memories``, or pg_repack online; docs/context.md, 'Big scopes').

Citus propagates ``ALTER TABLE ... SET (...)`` to the shards (``SET STORAGE`` it refuses).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 03:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories SET (toast_tuple_target = 4096)")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (toast_tuple_target)")
