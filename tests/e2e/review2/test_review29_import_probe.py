"""review29 probes: import forgeries beyond the ones issue 29 listed."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.errors import InvalidInput
from service.lifecycle.transfer import import_store
from tests.e2e.review2.test_import_trusts_nothing import fresh_db, header, memory  # noqa: F401
from tests.lifecycle.test_transfer import resources, write


async def _run(url: str, path: Path, org: str) -> Any:
    async with resources(url) as target:
        try:
            return await import_store(target, path, org=org)
        except InvalidInput as exc:
            return exc


async def test_key_with_format_characters_is_not_imported(fresh_db: str, tmp_path: Path) -> None:  # noqa: F811
    bad = memory(key="deploy\u202eroot")
    zw = memory(key="dep\u200bloy")
    path = write(tmp_path / "k.jsonl", [header(fresh_db), bad, zw, {"kind": "end"}])
    await _run(fresh_db, path, "keys")
    with psycopg.connect(fresh_db) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM memories WHERE key IS NOT NULL")]
    assert not [k for k in keys if any(c in k for c in "\u202e\u200b")], keys


async def test_superseded_by_across_namespaces_is_not_imported(
    fresh_db: str, tmp_path: Path  # noqa: F811
) -> None:
    """The replacement lives in the old memory's namespace (43c58be); import set any pair."""
    new = memory(namespace="mallory")
    old = memory(namespace="ivy", superseded_by=new["id"])
    path = write(tmp_path / "s.jsonl", [header(fresh_db), new, old, {"kind": "end"}])
    await _run(fresh_db, path, "sup")
    with psycopg.connect(fresh_db) as conn:
        rows = conn.execute(
            "SELECT o.namespace, n.namespace FROM memories o JOIN memories n "
            "ON n.id = o.superseded_by"
        ).fetchall()
    assert all(a == b for a, b in rows), rows


async def test_self_superseded_memory(fresh_db: str, tmp_path: Path) -> None:  # noqa: F811
    m = memory()
    m["superseded_by"] = m["id"]
    path = write(tmp_path / "self.jsonl", [header(fresh_db), m, {"kind": "end"}])
    await _run(fresh_db, path, "self")
    with psycopg.connect(fresh_db) as conn:
        rows = conn.execute("SELECT count(*) FROM memories WHERE superseded_by = id").fetchone()
    assert rows == (0,)


@pytest.mark.parametrize("name", ["x" * 5000, "ghp_a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8"])
async def test_artifact_name_bounded_and_redacted(
    fresh_db: str, tmp_path: Path, name: str  # noqa: F811
) -> None:
    art = {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "ivy", "name": name,
           "body": {"a": 1}}
    path = write(tmp_path / "an.jsonl", [header(fresh_db), art, {"kind": "end"}])
    await _run(fresh_db, path, "an")
    with psycopg.connect(fresh_db) as conn:
        rows = [r[0] for r in conn.execute("SELECT name FROM artifacts")]
    assert all(len(r) <= 300 and "ghp_" not in r for r in rows), [r[:50] for r in rows]
    if len(name) > 300:
        assert not rows  # refused, like a remember of such a name


async def test_artifact_memory_in_another_namespace(fresh_db: str, tmp_path: Path) -> None:  # noqa: F811
    other = memory(namespace="mallory")
    art = {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "ivy", "name": "x",
           "body": {"a": 1}, "memory_id": other["id"]}
    path = write(tmp_path / "am.jsonl", [header(fresh_db), other, art, {"kind": "end"}])
    await _run(fresh_db, path, "am")
    with psycopg.connect(fresh_db) as conn:
        rows = conn.execute(
            "SELECT a.namespace, m.namespace, m.type FROM artifacts a JOIN memories m "
            "ON m.id = a.memory_id").fetchall()
    assert all(a == b and t == "artifact" for a, b, t in rows), rows


async def test_relation_to_a_memory_of_another_org(fresh_db: str, tmp_path: Path) -> None:  # noqa: F811
    first = memory()
    path = write(tmp_path / "o1.jsonl", [header(fresh_db), first, {"kind": "end"}])
    await _run(fresh_db, path, "org-one")
    linker = memory(relations=[{"target_id": first["id"], "relationship": "relates_to"}])
    path2 = write(tmp_path / "o2.jsonl", [header(fresh_db), linker, {"kind": "end"}])
    await _run(fresh_db, path2, "org-two")
    with psycopg.connect(fresh_db) as conn:
        rows = conn.execute(
            "SELECT s.org_id, t.org_id FROM relations r JOIN memories s ON s.id = r.source_id "
            "JOIN memories t ON t.id = r.target_id").fetchall()
    assert all(a == b for a, b in rows), rows
