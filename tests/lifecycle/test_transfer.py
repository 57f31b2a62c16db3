"""Export a store, import it into a fresh database: the same memories, and byte-identical
packs for a fixed set of goals. Import is idempotent, and redaction and the gate still apply."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.domain import keys as key_service
from service.embedding.fake import FakeEmbedder
from service.lifecycle.local import LocalResources
from service.lifecycle.transfer import export_store, import_store
from service.resources import open_resources
from service.store.database import (
    ensure_database,
    upgrade,
    with_database,
)
from tests.conftest import Key, make_settings

GOALS = [
    ("How do we deploy the billing service?", "ivy"),
    ("What breaks when importing CSV files?", "ivy:s1"),
    ("Which datastore holds invoices and why?", "ivy:s1:t1"),
]

FACTS = [
    ("ivy", "decision", "We deploy the billing service with blue-green releases behind the load balancer."),
    ("ivy", "constraint", "Invoices must stay in Postgres: the auditors require a single datastore."),
    ("ivy:s1", "gotcha", "The CSV importer silently drops rows whose date column uses two-digit years."),
    ("ivy:s1", "procedure", "To rerun a failed import, truncate the staging table and replay the queue."),
    ("ivy:s1:t1", "task", "Migrate the invoice archive to the new partitioned table by Friday."),
    ("other", "decision", "The marketing site is built with a static generator and hosted on a CDN."),
]


@pytest.fixture
async def fresh_db(pg_server: Any) -> str:
    admin = pg_server.get_uri()
    name = f"ctxpack_rt_{uuid.uuid4().hex[:8]}"
    ensure_database(admin, name)
    url = str(with_database(admin, name))
    upgrade(url)
    return url


@pytest.fixture
async def fresh_app(fresh_db: str) -> AsyncIterator[FastAPI]:
    application = create_app(make_settings(fresh_db, audit_prune_interval_seconds=0), embedder=FakeEmbedder(), database_url=fresh_db)
    async with application.router.lifespan_context(application):
        yield application


@contextlib.asynccontextmanager
async def resources(url: str) -> AsyncIterator[LocalResources]:
    async with open_resources(
        make_settings(url), database_url=url, embedder=FakeEmbedder(), listen=False
    ) as res:
        yield res


async def seed(client: httpx.AsyncClient, auth: dict[str, str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for i, (ns, type_, content) in enumerate(FACTS):
        body: dict[str, Any] = {
            "namespace": ns, "type": type_, "content": content, "tags": [f"t{i}"],
            "metadata": {"n": i, "nested": {"ok": True}}, "valid_at": f"2026-03-0{i + 1}T10:00:00Z",
        }
        if i == 1:
            body["related"] = [{"id": ids["0"], "relationship": "depends_on"}]
        if i == 4:
            body["expires_at"] = (datetime.now(UTC) + timedelta(days=30)).isoformat()
        r = await client.post("/v1/remember", json=body, headers=auth)
        assert r.status_code == 201, r.text
        ids[str(i)] = r.json()["id"]
    newer = await client.post(
        "/v1/remember",
        json={"namespace": "ivy:s1", "type": "procedure", "supersedes": ids["3"],
              "content": "To rerun a failed import, replay the queue: the staging table is truncated for you now."},
        headers=auth,
    )
    ids["new"] = newer.json()["id"]
    art = await client.post(
        "/v1/artifacts", json={"namespace": "ivy", "name": "deploy matrix", "body": {"envs": ["prod", "staging"]}},
        headers=auth,
    )
    assert art.status_code == 201, art.text
    return ids


def rows(url: str, org_id: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        mems = conn.execute(
            "SELECT id, namespace, type, name, content, content_hash, embedding::text, project, domain,"
            " agent_id, tags, source, origin, url, valid_at, created_at, updated_at, superseded_by,"
            " expires_at, metadata, key FROM memories WHERE org_id = %s ORDER BY id",
            (org_id,),
        ).fetchall()
        rels = conn.execute(
            "SELECT id, source_id, target_id, relationship, created_at FROM relations"
            " WHERE org_id = %s ORDER BY id", (org_id,),
        ).fetchall()
        arts = conn.execute(
            "SELECT id, namespace, name, summary, body, memory_id, created_at FROM artifacts"
            " WHERE org_id = %s ORDER BY id", (org_id,),
        ).fetchall()
    return [*mems, ("relations", *rels), ("artifacts", *arts)]


async def packs(client: httpx.AsyncClient, auth: dict[str, str]) -> list[tuple[str, list[Any]]]:
    out = []
    for goal, ns in GOALS:
        r = await client.post("/v1/context", json={"goal": goal, "namespace": ns, "layer": "deep_search"}, headers=auth)
        assert r.status_code == 200, r.text
        body = r.json()
        out.append((body["markdown"], [[i["id"], i["score"]] for s in body["sections"] for i in s["items"]]))
    return out


@pytest.mark.parametrize("with_vectors", [True, False])
async def test_round_trip_same_memories_same_packs(
    client: httpx.AsyncClient, key: Key, pg_url: str, fresh_db: str, fresh_app: FastAPI, tmp_path: Path,
    with_vectors: bool,
) -> None:
    await seed(client, key.headers)
    out = io.StringIO()
    async with resources(pg_url) as source:
        exported = await export_store(source, out, org=key.org, with_vectors=with_vectors)
    assert exported.memories == 8 and exported.artifacts == 1
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["kind"] == "header" and lines[0]["version"] == 1 and lines[0]["dims"] == 384
    assert lines[-1] == {"kind": "end", "memories": 8, "artifacts": 1}
    assert ("embedding" in lines[1]) is with_vectors
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue())

    async with resources(fresh_db) as target:
        summary = await import_store(target, path, org="imported")
        again = await import_store(target, path, org="imported")
    assert summary.created == 8 and summary.rejected == {} and summary.complete
    assert summary.reembedded == (0 if with_vectors else 8)
    assert summary.relations >= 2 and summary.artifacts == 1
    assert again.created == 0 and again.existing == 8

    async with fresh_app.state.ctx.sessionmaker() as session:
        created = await key_service.create_key(session, org="imported", scopes=["read", "write"])
        await session.commit()
    mine, copied = rows(pg_url, key.org_id), rows(fresh_db, created.org_id)
    for a, b in zip(mine, copied, strict=True):
        assert a == b, [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]

    transport = httpx.ASGITransport(app=fresh_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as other:
        theirs = await packs(other, {"Authorization": f"Bearer {created.key}"})
    ours = await packs(client, key.headers)
    assert any(items for _, items in ours)
    assert [m.encode() for m, _ in theirs] == [m.encode() for m, _ in ours]
    assert theirs == ours


async def test_export_filters_and_import_applies_redaction_and_gate(
    client: httpx.AsyncClient, key: Key, pg_url: str, fresh_db: str, tmp_path: Path
) -> None:
    await seed(client, key.headers)
    out = io.StringIO()
    async with resources(pg_url) as source:
        exported = await export_store(source, out, org=key.org, namespace="ivy:s1")
    assert exported.memories == 4  # the gotcha, both procedures, the task below
    lines = out.getvalue().splitlines()
    memory = json.loads(lines[1])
    # An edited file: a secret pasted into one memory, a fragment in another.
    secret = "sk-live-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    memory["content"] += f" The API key is {secret}"
    lines[1] = json.dumps(memory)
    fragment = json.loads(lines[2])
    fragment["content"] = "ok"
    fragment["id"] = str(uuid.uuid4())
    lines[2] = json.dumps(fragment)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n")
    async with resources(fresh_db) as target:
        summary = await import_store(target, path, org="edited")
    assert sum(summary.rejected.values()) == 1
    with psycopg.connect(fresh_db) as conn:
        dump = " ".join(r[0] for r in conn.execute("SELECT content FROM memories").fetchall())
    assert secret not in dump and "REDACTED" in dump

    future = io.StringIO()
    since = datetime.now(UTC) + timedelta(hours=1)
    async with resources(pg_url) as source:
        assert (await export_store(source, future, org=key.org, since=since)).memories == 0


async def test_import_refuses_a_foreign_file(fresh_db: str, tmp_path: Path) -> None:
    from service.errors import InvalidInput

    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    async with resources(fresh_db) as target:
        with pytest.raises(InvalidInput):
            await import_store(target, path, org="x")


KEYED = [
    ("db", "The staging database listens on port 5433, not the default 5432."),
    ("pool", "Staging runs pgbouncer in transaction mode, so prepared statements stay off."),
    ("db", "The staging database moved to port 6432 behind the new connection pooler."),
]


async def keyed_seed(client: httpx.AsyncClient, auth: dict[str, str]) -> None:
    for key, content in KEYED:
        r = await client.post("/v1/remember", json={"namespace": "kay", "key": key, "content": content}, headers=auth)
        assert r.status_code == 201, r.text


async def export_lines(url: str, org: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    async with resources(url) as source:
        await export_store(source, out, org=org)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def current_keys(url: str, org: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute(
            "SELECT m.key, m.content FROM memories m JOIN orgs o USING (org_id) WHERE o.name = %s"
            " AND m.key IS NOT NULL AND m.superseded_by IS NULL", (org,),
        ).fetchall())


async def test_keys_round_trip_and_import_is_idempotent_by_key(
    client: httpx.AsyncClient, key: Key, pg_url: str, fresh_db: str, tmp_path: Path
) -> None:
    await keyed_seed(client, key.headers)
    lines = await export_lines(pg_url, key.org)
    memories = [line for line in lines if line["kind"] == "memory"]
    # Export holds every column, the key included, on current and superseded versions alike.
    assert [(m["key"], m["superseded_by"] is None) for m in memories] == [("db", False), ("pool", True), ("db", True)]
    path = write(tmp_path / "keyed.jsonl", lines)

    async with resources(fresh_db) as target:
        first = await import_store(target, path, org="copy")
        again = await import_store(target, path, org="copy")
    assert (first.created, first.keys, first.conflict) == (3, 3, 0)
    assert (again.created, again.existing, again.conflict) == (0, 3, 0)
    with psycopg.connect(fresh_db) as conn:
        org_id = conn.execute("SELECT org_id FROM orgs WHERE name = 'copy'").fetchone()[0]  # type: ignore[index]
    mine, copied = rows(pg_url, key.org_id), rows(fresh_db, org_id)
    assert mine == copied  # every column, keys included

    # The same memories under other ids (another store's export): not inserted twice. The
    # same content under a current key is a duplicate; other content is a conflict, skipped.
    pool = next(m for m in memories if m["key"] == "pool")
    twin = {**pool, "id": str(uuid.uuid4())}
    rival = {**pool, "id": str(uuid.uuid4()), "key": "db",
             "content": "The staging database is reached through an SSH tunnel on port 2222."}
    other = write(tmp_path / "other.jsonl", [lines[0], twin, rival, lines[-1]])
    async with resources(fresh_db) as target:
        summary = await import_store(target, other, org="copy")
    assert (summary.created, summary.duplicate, summary.conflict) == (0, 1, 1)
    assert summary.conflicts == [{"namespace": "kay", "key": "db", "id": rival["id"],
                                  "current_id": next(m["id"] for m in memories if m["key"] == "db" and not m["superseded_by"])}]
    assert summary.as_dict()["conflict"] == 1
    assert current_keys(fresh_db, "copy") == {"db": KEYED[2][1], "pool": KEYED[1][1]}

    # The source writes the key again; its next export, imported, carries the change over:
    # the file says the copy's current version was superseded, so the new one replaces it.
    newest = "The staging database now listens on port 7432 after the pooler upgrade."
    r = await client.post("/v1/remember", json={"namespace": "kay", "key": "db", "content": newest}, headers=key.headers)
    assert r.json()["status"] == "updated"
    later = write(tmp_path / "later.jsonl", await export_lines(pg_url, key.org))
    async with resources(fresh_db) as target:
        synced = await import_store(target, later, org="copy")
    assert (synced.created, synced.existing, synced.conflict) == (1, 3, 0)
    assert current_keys(fresh_db, "copy") == {"db": newest, "pool": KEYED[1][1]}
    # The same chain on both sides (an existing row's own times are not rewritten by import).
    def chain(url: str, org: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(url) as conn:
            return conn.execute(
                "SELECT id, key, superseded_by, content FROM memories WHERE org_id = %s ORDER BY id", (org,)
            ).fetchall()

    assert chain(pg_url, key.org_id) == chain(fresh_db, org_id)


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "memory", "id": "not-a-uuid", "namespace": "ivy", "content": "x"},
        {"kind": "memory", "id": str(uuid.uuid4()), "namespace": "ivy", "created_at": "Tuesday"},
        {"kind": "memory", "id": str(uuid.uuid4()), "namespace": "ivy", "relations": ["x"]},
        {"kind": "artifact", "namespace": "ivy", "name": "no id"},
        {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "bad name!", "body": {}},
    ],
)
async def test_import_refuses_a_bad_line_and_writes_nothing(
    fresh_db: str, tmp_path: Path, bad: dict[str, Any]
) -> None:
    from service.errors import InvalidInput

    good = {
        "kind": "memory", "id": str(uuid.uuid4()), "namespace": "ivy", "type": "decision",
        "content": "We deploy the billing service with blue-green releases behind the load balancer.",
    }
    header = {"kind": "header", "format": "ctxpack-export", "version": 1, "model": "x", "dims": 8}
    path = write(tmp_path / "bad.jsonl", [header, good, bad, {"kind": "end"}])
    async with resources(fresh_db) as target:
        with pytest.raises(InvalidInput) as refused:
            await import_store(target, path, org="badfile")
    assert refused.value.details["field"] == "file" and "line 3" in refused.value.message
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM orgs WHERE name = 'badfile'").fetchone() == (0,)


# --- through the call runner (transport cli): audited, one unit of work ---------------------


def calls(url: str, org_id: Any, action: str) -> list[tuple[str, int, dict[str, Any]]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT outcome, status_code, details FROM audit_events WHERE org_id = %s AND action = %s"
            " ORDER BY created_at", (org_id, action),
        ).fetchall()


def memory_line(content: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "memory", "id": str(uuid.uuid4()), "namespace": "imp", "type": "decision",
            "content": content, **fields}


HEADER = {"kind": "header", "format": "ctxpack-export", "version": 1, "model": "x", "dims": 8}


class BrokenAfter(FakeEmbedder):
    """The fake embedder, failing from its ``calls``-th call on (a model that dies half-way)."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.left = calls

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("the model went away")
        return super().embed_documents(texts)


def memories_of(url: str, org_id: Any) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM memories WHERE org_id = %s", (org_id,)).fetchone()[0]  # type: ignore[index]


async def test_a_failed_import_writes_nothing_and_is_audited_as_a_cli_call(
    key: Key, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.lifecycle import transfer

    monkeypatch.setattr(transfer, "IMPORT_CHUNK", 1)  # one memory per embedding call
    lines = [HEADER, *(memory_line(content) for _, _, content in FACTS[:3]),
             {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "imp", "name": "matrix",
              "body": {"envs": ["prod"]}}, {"kind": "end"}]
    path = write(tmp_path / "three.jsonl", lines)
    settings = make_settings(pg_url)
    # The first memory is embedded and inserted, the second's embedding fails: all rolled back.
    async with open_resources(settings, database_url=pg_url, embedder=BrokenAfter(1), listen=False) as res:
        with pytest.raises(RuntimeError, match="went away"):
            await import_store(res, path, org=key.org)
    assert memories_of(pg_url, key.org_id) == 0
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM artifacts WHERE org_id = %s", (key.org_id,)).fetchone() == (0,)
    failed = calls(pg_url, key.org_id, "import")
    assert [(o, s) for o, s, _ in failed] == [("error", 500)]
    assert failed[0][2]["transport"] == "cli" and failed[0][2]["error_code"] == "internal_error"

    # Run again: all of it goes in, audited once more, as a success.
    async with resources(pg_url) as res:
        summary = await import_store(res, path, org=key.org)
    assert (summary.created, summary.artifacts) == (3, 1)
    assert memories_of(pg_url, key.org_id) == 3
    done = calls(pg_url, key.org_id, "import")
    assert [(o, s) for o, s, _ in done] == [("error", 500), ("ok", 200)]
    assert done[1][2]["created"] == 3 and done[1][2]["artifacts"] == 1


async def test_an_import_row_names_the_memories_it_stored_and_counts_its_redactions(
    key: Key, pg_url: str, tmp_path: Path
) -> None:
    # As a batch's row: memory_ids (the memories stored, in file order), redaction_count (a
    # rejected memory's included; an artifact's name, summary and body too), rejection_count.
    secret = "sk-live-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    first = memory_line(f"{FACTS[0][2]} The deploy key is {secret}.")
    second = memory_line(FACTS[1][2])
    fragment = memory_line(f"ok {secret}")
    artifact = {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "imp",
                "name": f"deploy {secret}", "body": {"token": secret, "envs": ["prod"]}}
    path = write(tmp_path / "secrets.jsonl", [HEADER, first, fragment, second, artifact, {"kind": "end"}])

    def import_rows() -> list[tuple[Any, ...]]:
        with psycopg.connect(pg_url) as conn:
            return conn.execute(
                "SELECT memory_ids, redaction_count, rejection_count FROM audit_events"
                " WHERE org_id = %s AND action = 'import' ORDER BY created_at", (key.org_id,),
            ).fetchall()

    async with resources(pg_url) as res:
        summary = await import_store(res, path, org=key.org)
    assert (summary.created, summary.artifacts, sum(summary.rejected.values())) == (2, 1, 1)
    assert summary.as_dict()["redactions"] == 4
    assert import_rows() == [([uuid.UUID(first["id"]), uuid.UUID(second["id"])], 4, 1)]

    # Run again: every id is in, so nothing is stored; only the fragment is read (and refused)
    # again, its redaction counted again.
    async with resources(pg_url) as res:
        await import_store(res, path, org=key.org)
    assert import_rows()[1] == ([], 1, 1)


async def test_an_import_line_over_the_scan_bound_is_refused_naming_the_field(
    key: Key, pg_url: str, tmp_path: Path
) -> None:
    from service.errors import PayloadTooLarge

    limit = 4000
    big = memory_line("The billing export runs nightly. " * 150)  # ~5 kB of content
    path = write(tmp_path / "big.jsonl", [HEADER, memory_line(FACTS[0][2]), big, {"kind": "end"}])
    settings = make_settings(pg_url, max_scanned_bytes=limit)
    async with open_resources(settings, database_url=pg_url, embedder=FakeEmbedder(), listen=False) as res:
        with pytest.raises(PayloadTooLarge) as refused:
            await import_store(res, path, org=key.org)
    assert refused.value.details["field"] == "content"
    assert refused.value.message.startswith("line 3: content: ") and f"at most {limit}" in refused.value.message
    assert memories_of(pg_url, key.org_id) == 0
    rows_ = calls(pg_url, key.org_id, "import")
    assert [(o, s) for o, s, _ in rows_] == [("refused", 413)]
    assert rows_[0][2] == {"error_code": "payload_too_large", "field": "content", "transport": "cli"}

    # Into a new org: refused before the org is made (nothing written, nowhere to audit).
    new_org = f"bigfile-{uuid.uuid4().hex[:8]}"
    async with open_resources(settings, database_url=pg_url, embedder=FakeEmbedder(), listen=False) as res:
        with pytest.raises(PayloadTooLarge):
            await import_store(res, path, org=new_org)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM orgs WHERE name = %s", (new_org,)).fetchone() == (0,)


class Unwritable(io.StringIO):
    """An output that fails once the header is out (a full disk)."""

    def write(self, s: str) -> int:
        if self.tell():
            raise OSError("no space left on device")
        return super().write(s)


async def test_an_export_is_audited_as_a_cli_call(client: httpx.AsyncClient, key: Key, pg_url: str) -> None:
    await seed(client, key.headers)
    async with resources(pg_url) as source:
        with pytest.raises(OSError, match="no space"):
            await export_store(source, Unwritable(), org=key.org)
        summary = await export_store(source, io.StringIO(), org=key.org, namespace="ivy:s1")
    assert summary.memories == 4
    rows_ = calls(pg_url, key.org_id, "export")
    assert [(o, s) for o, s, _ in rows_] == [("error", 500), ("ok", 200)]
    assert rows_[0][2] == {"error_code": "internal_error", "transport": "cli"}
    assert rows_[1][2] == {"memories": 4, "artifacts": 0}
