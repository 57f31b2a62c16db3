"""store/bulk.py: ``copy_memories`` writes memory rows by one binary COPY, into the columns
it knows only (the benchmarks' seeding; the write path's rules are the caller's to vouch for)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from service.embedding.fake import FakeEmbedder
from service.store.bulk import copy_memories
from service.store.database import libpq_url
from tests.conftest import Key


def test_rows_are_copied_in_and_an_unknown_column_is_refused(pg_url: str, key: Key) -> None:
    org = key.org_id
    vector = FakeEmbedder().embed_documents(["The pager rota lives in the wiki."])[0]
    now = datetime.now(UTC)
    columns = ("org_id", "id", "namespace", "type", "name", "content", "content_hash",
               "embedding", "tags", "metadata", "created_at", "updated_at")  # fmt: skip
    rows = [
        (org, uuid.uuid4(), "alice", "episode", f"n{i}", f"The pager rota lives in the wiki ({i}).",
         hashlib.sha256(str(i).encode()).hexdigest(), vector, ["ops"], {"i": i}, now, now)
        for i in range(3)
    ]  # fmt: skip
    with psycopg.connect(libpq_url(pg_url)) as conn:
        assert copy_memories(conn, columns, rows) == 3
        conn.commit()
        stored = conn.execute(
            "SELECT name, tags, metadata, vector_dims(embedding) FROM memories "
            "WHERE org_id = %s ORDER BY name", (org,),
        ).fetchall()  # fmt: skip
        assert stored == [(f"n{i}", ["ops"], {"i": i}, 384) for i in range(3)]
        with pytest.raises(ValueError, match="superseded_by"):
            copy_memories(conn, ("org_id", "superseded_by"), [])
