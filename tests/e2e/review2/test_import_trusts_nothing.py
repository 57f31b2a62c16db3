"""Review 2, finding 6: import trusted the file. A forged content_hash made a later, different
remember a "duplicate"; times past year 9999 in UTC were stored and broke every read after;
relation labels and artifact schema keys and projects went in unchecked; a bad line late in a
file (a bad vector) was found only when its batch was written, after earlier batches had
committed. Import now derives what the service derives and checks the whole file first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.errors import InvalidInput
from service.lifecycle.local import model_id
from service.lifecycle.transfer import IMPORT_CHUNK, import_store
from service.store.database import ensure_database, upgrade, with_database
from tests.conftest import make_settings
from tests.lifecycle.test_transfer import resources, write


@pytest.fixture
def fresh_db(pg_server: Any) -> str:
    """An empty, migrated database of its own: import writes into it alone."""
    admin = pg_server.get_uri()
    name = f"ctxpack_imp_{uuid.uuid4().hex[:8]}"
    ensure_database(admin, name)
    url = str(with_database(admin, name))
    upgrade(url)
    return url


FACT = "We deploy the billing service with blue-green releases behind the load balancer."
OTHER = "The CSV importer silently drops rows whose date column uses two-digit years."


def header(url: str) -> dict[str, Any]:
    settings = make_settings(url)
    return {"kind": "header", "format": "ctxpack-export", "version": 1,
            "model": model_id(settings), "dims": settings.embedding_dims}


def memory(**extra: Any) -> dict[str, Any]:
    return {"kind": "memory", "id": str(uuid.uuid4()), "namespace": "ivy", "type": "decision",
            "content": f"{FACT} ({uuid.uuid4().hex[:6]})", **extra}


async def test_a_forged_hash_never_makes_another_text_a_duplicate(
    fresh_db: str, tmp_path: Path
) -> None:
    from hashlib import sha256

    from service.domain.write_pipeline import content_hash

    forged = memory(content=FACT, content_hash=content_hash(OTHER))
    artifact_memory = memory(type="artifact", content="Runner inventory: JSON object.",
                             metadata={"artifact_id": str(uuid.uuid4())},
                             content_hash=sha256(b"x").hexdigest())
    path = write(tmp_path / "f.jsonl", [header(fresh_db), forged, artifact_memory, {"kind": "end"}])
    async with resources(fresh_db) as target:
        summary = await import_store(target, path, org="forge")
    assert summary.created == 2
    with psycopg.connect(fresh_db) as conn:
        rows = dict(conn.execute("SELECT id::text, content_hash FROM memories").fetchall())
    assert rows[forged["id"]] == content_hash(FACT)
    expected = sha256(f"artifact:{artifact_memory['metadata']['artifact_id']}".encode()).hexdigest()
    assert rows[artifact_memory["id"]] == expected


BAD_LINES: list[tuple[str, dict[str, Any]]] = [
    ("created beyond 9999", memory(created_at="9999-12-31T23:00:00-05:00")),
    ("expires beyond 9999", memory(expires_at="9999-12-31T22:00:00-08:00")),
    ("relation label not a slug", memory(relations=[{"target_id": str(uuid.uuid4()),
                                                     "relationship": "Depends On!"}])),
    ("relation label holding a secret", memory(relations=[{
        "target_id": str(uuid.uuid4()), "relationship": "ghp_a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8"}])),
    ("artifact project not a slug", {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "ivy",
                                     "name": "x", "body": {"a": 1}, "project": "no spaces/allowed"}),
    ("artifact body with NaN", {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "ivy",
                                "name": "x", "body": {"a": float("nan")}}),
    ("vector of the wrong size", memory(embedding=[0.1, 0.2, 0.3])),
    ("metadata with Infinity", memory(metadata={"x": float("inf")})),
]


@pytest.mark.parametrize(("what", "bad"), BAD_LINES, ids=[w for w, _ in BAD_LINES])
async def test_a_bad_line_late_in_the_file_writes_nothing(
    fresh_db: str, tmp_path: Path, what: str, bad: dict[str, Any]
) -> None:
    good = [memory() for _ in range(IMPORT_CHUNK + 5)]
    lines = [header(fresh_db), *good, bad, {"kind": "end"}]
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with resources(fresh_db) as target:
        with pytest.raises(InvalidInput) as refused:
            await import_store(target, path, org="late")
    assert f"line {len(good) + 2}" in refused.value.message, refused.value.message
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)


async def test_artifact_schema_keys_and_size_are_derived(
    fresh_db: str, tmp_path: Path
) -> None:
    secret_key = "AKIAIOSFODNN7EXAMPLE"
    art = {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "ivy", "name": "Scan",
           "body": {"hosts": 2, "region": "eu"}, "size_bytes": 999999,
           "schema_keys": [secret_key, "made-up"]}
    path = write(tmp_path / "a.jsonl", [header(fresh_db), art, {"kind": "end"}])
    async with resources(fresh_db) as target:
        await import_store(target, path, org="arts")
    with psycopg.connect(fresh_db) as conn:
        keys, size = conn.execute("SELECT schema_keys, size_bytes FROM artifacts").fetchone()  # type: ignore[misc]
    assert keys == ["hosts", "region"]
    assert size == len(json.dumps(art["body"], separators=(",", ":")))
