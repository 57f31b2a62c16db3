"""Migration 0003: the content key becomes (org, namespace, project, agent_id, hash) over
current memories, NULLs not distinct; rows stored under the old key carry over untouched."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from service.store.database import ensure_database, upgrade, with_database

VEC = "[" + ",".join(["0.1"] * 384) + "]"


def _insert(
    conn: psycopg.Connection,
    org: uuid.UUID,
    project: str | None,
    agent: str | None = None,
    superseded_by: uuid.UUID | None = None,
    content_hash: str = "h1",
) -> uuid.UUID:
    mid = uuid.uuid4()
    conn.execute(
        "INSERT INTO memories (org_id, id, namespace, type, name, content, content_hash, "
        "embedding, project, agent_id, superseded_by) "
        "VALUES (%s, %s, 'alice', 'episode', 'n', 'c', %s, %s, %s, %s, %s)",
        (org, mid, content_hash, VEC, project, agent, superseded_by),
    )
    return mid


def test_existing_rows_carry_over_and_the_new_key_holds(pg_server: object) -> None:
    admin = pg_server.get_uri()  # type: ignore[attr-defined]
    ensure_database(admin, "ctxpack_0003")
    url = str(with_database(admin, "ctxpack_0003"))
    upgrade(url, "0002")
    org = uuid.uuid4()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO orgs (org_id, name) VALUES (%s, %s)", (org, f"o-{org}"))
        old = _insert(conn, org, "p2")
        _insert(conn, org, None, content_hash="h2")
        with pytest.raises(psycopg.errors.UniqueViolation):  # the old key ignored project
            _insert(conn, org, "p1")
    upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(
            "SELECT count(*) FROM memories WHERE org_id = %s", (org,)
        ).fetchone() == (2,)
        _insert(conn, org, "p1")  # same text, another project: stored
        _insert(conn, org, "p1", agent="scout")  # another diary: stored
        with pytest.raises(psycopg.errors.UniqueViolation):  # NULLs are not distinct
            _insert(conn, org, None, content_hash="h2")
        # A superseded row leaves the key: the text can be current again.
        newer = _insert(conn, org, "p2", content_hash="h3")
        conn.execute("UPDATE memories SET superseded_by = %s WHERE id = %s", (newer, old))
        _insert(conn, org, "p2")
