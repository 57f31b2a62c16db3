"""Bulk loading of the memories table by binary COPY, for benchmarks and data tools that
seed a store of a given size without going through the write path (the gate, redaction and
deduplication are skipped: the caller vouches for its rows).

The one place that writes memories by COPY: ``copy_memories(conn, columns, rows)`` on a
synchronous psycopg connection (the caller commits).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

MEMORY_COLUMNS: dict[str, str] = {
    "org_id": "uuid",
    "id": "uuid",
    "namespace": "varchar",
    "type": "varchar",
    "name": "text",
    "content": "text",
    "content_hash": "varchar",
    "embedding": "vector",
    "project": "varchar",
    "agent_id": "varchar",
    "source": "text",
    "tags": "text[]",
    "metadata": "jsonb",
    "valid_at": "timestamptz",
    "created_at": "timestamptz",
    "updated_at": "timestamptz",
}
"""The columns a bulk load may set, with their binary COPY types."""


def copy_memories(
    conn: psycopg.Connection[Any], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Write ``rows`` (values in ``columns`` order; embeddings as float32 arrays or lists)
    into ``memories`` with one binary COPY. Returns the number of rows written.

    Raises:
        ValueError: a column that is not in ``MEMORY_COLUMNS``.
    """
    unknown = [c for c in columns if c not in MEMORY_COLUMNS]
    if unknown:
        raise ValueError(f"not a bulk-loadable memories column: {', '.join(unknown)}")
    register_vector(conn)
    count = 0
    statement = f"COPY memories ({', '.join(columns)}) FROM STDIN WITH (FORMAT BINARY)"
    with conn.cursor().copy(statement) as copy:
        copy.set_types([MEMORY_COLUMNS[c] for c in columns])
        for row in rows:
            copy.write_row(row)
            count += 1
    return count
