"""Every write rule through every write path: remember, a batch item, a keyed write, PATCH,
import, and the artifact's memory where the rule applies to it. A rule that holds on one
path and not another fails here (8 of 198 commits once fixed exactly that).

Each path takes the same fields and answers one of: ``stored`` (with the stored row),
``refused`` (a 4xx, or an import that refuses the file or counts the item invalid), so every
rule is one assertion over all paths. A path skips a rule only for a field it does not have
(an artifact has no tags or times; its summary is not gated) or a right it does not check
(import runs as the operator)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from service.embedding.fake import FakeEmbedder
from service.errors import InvalidInput
from service.lifecycle.local import model_id
from service.lifecycle.transfer import import_store
from service.resources import open_resources
from tests.conftest import Key, KeyFactory, make_settings

GOOD = "The staging database listens on port 5433; the default 5432 is the legacy cluster."
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BEYOND = "9999-12-31T23:00:00-05:00"


@dataclass
class Outcome:
    refused: bool
    status: int = 0
    field: str | None = None
    row: dict[str, Any] | None = None  # the stored memory, as the database holds it
    id: str | None = None  # its id


@dataclass
class Ctx:
    """One rule's run: the client, the key under test, an admin key of the same org (the
    owner of what a PATCH changes), the database and a folder."""

    client: httpx.AsyncClient
    key: Key
    owner: Key
    url: str
    tmp: Path
    base: dict[str, Any]  # fields of the memory a PATCH changes


Path_ = Callable[[Ctx, dict[str, Any]], Awaitable[Outcome]]


def stored_row(url: str, org_id: uuid.UUID, memory_id: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        cur = conn.execute(
            "SELECT content, name, metadata, valid_at, expires_at, project, tags "
            "FROM memories WHERE org_id = %s AND id = %s",
            (org_id, uuid.UUID(memory_id)),
        )
        names = [d.name for d in cur.description or []]
        row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


def answer(response: httpx.Response) -> Outcome:
    if response.status_code >= 400:
        error = response.json()["error"]
        return Outcome(True, response.status_code, error.get("field"))
    return Outcome(False, response.status_code)


def raw(fields: dict[str, Any]) -> str:
    """JSON as a client could send it: NaN and Infinity literals included."""
    return json.dumps(fields, allow_nan=True)


async def post(client: httpx.AsyncClient, key: Key, method: str, url: str, body: dict[str, Any]) -> httpx.Response:
    headers = {**key.headers, "content-type": "application/json"}
    return await client.request(method, url, content=raw(body).encode(), headers=headers)


async def via_remember(c: Ctx, f: dict[str, Any]) -> Outcome:
    r = await post(c.client, c.key, "POST", "/v1/remember", {"namespace": "w", "content": GOOD, **f})
    out = answer(r)
    if not out.refused:
        out.id = r.json()["id"]
        out.row = stored_row(c.url, c.key.org_id, r.json()["id"])
    return out


async def via_batch(c: Ctx, f: dict[str, Any]) -> Outcome:
    item = {"namespace": "w", "content": GOOD, **f}
    r = await post(c.client, c.key, "POST", "/v1/remember/batch", {"items": [item]})
    out = answer(r)
    if out.field:
        out.field = out.field.removeprefix("items.0.")
    if not out.refused:
        result = r.json()["items"][0]
        if result["status"] == "rejected":
            return Outcome(True, 422, "content")
        out.id = result["id"]
        out.row = stored_row(c.url, c.key.org_id, result["id"])
    return out


async def via_keyed(c: Ctx, f: dict[str, Any]) -> Outcome:
    return await via_remember(c, {"key": "staging-db", **f})


async def via_patch(c: Ctx, f: dict[str, Any]) -> Outcome:
    made = await c.client.post(
        "/v1/remember",
        json={"namespace": "w", "content": "Deploys freeze on Fridays after noon.", **c.base},
        headers=c.owner.headers,
    )
    mid = made.json()["id"]
    r = await post(c.client, c.key, "PATCH", f"/v1/memories/{mid}", {"content": GOOD, **f})
    out = answer(r)
    row = stored_row(c.url, c.key.org_id, mid)
    if out.refused:
        assert row["content"] == "Deploys freeze on Fridays after noon."  # nothing half-written
    else:
        out.id, out.row = mid, row
    return out


async def via_import(c: Ctx, f: dict[str, Any]) -> Outcome:
    settings = make_settings(c.url)
    org = c.key.org
    mid = str(uuid.uuid4())
    lines = [
        {"kind": "header", "format": "ctxpack-export", "version": 1,
         "model": model_id(settings), "dims": settings.embedding_dims},
        {"kind": "memory", "id": mid, "namespace": "w", "type": "episode", "content": GOOD, **f},
        {"kind": "end"},
    ]
    path = c.tmp / f"{org}.jsonl"
    path.write_text("".join(json.dumps(line, allow_nan=True) + "\n" for line in lines))
    async with open_resources(settings, database_url=c.url, embedder=FakeEmbedder(), listen=False) as res:
        try:
            summary = await import_store(res, path, org=org)
        except InvalidInput as exc:
            return Outcome(True, 422, exc.details.get("field"))
    if summary.created == 0:
        return Outcome(True, 422, "file")
    return Outcome(False, 200, row=stored_row(c.url, c.key.org_id, mid), id=mid)


# The artifact's memory: its summary is the memory's content, its body is checked as
# metadata is; it has no tags, times, key or gate.
ARTIFACT_FIELDS = {"content": "summary", "name": "name", "metadata": "body", "project": "project",
                   "namespace": "namespace"}


async def via_artifact(c: Ctx, f: dict[str, Any]) -> Outcome:
    unknown = set(f) - set(ARTIFACT_FIELDS)
    if unknown:
        pytest.skip(f"an artifact has no {', '.join(sorted(unknown))}")
    body = {"namespace": "w", "name": "Staging database", "summary": GOOD, "body": {"port": 5433}}
    body.update({ARTIFACT_FIELDS[k]: v for k, v in f.items()})
    r = await post(c.client, c.key, "POST", "/v1/artifacts", body)
    out = answer(r)
    out.field = {v: k for k, v in ARTIFACT_FIELDS.items()}.get(out.field or "", out.field)
    if not out.refused:
        out.id = r.json()["memory_id"]
        out.row = stored_row(c.url, c.key.org_id, r.json()["memory_id"])
    return out


PATHS: dict[str, Path_] = {
    "remember": via_remember,
    "batch": via_batch,
    "keyed": via_keyed,
    "patch": via_patch,
    "import": via_import,
    "artifact": via_artifact,
}


@pytest.fixture(params=list(PATHS))
def path(request: pytest.FixtureRequest) -> tuple[str, Path_]:
    return request.param, PATHS[request.param]


async def run(path: tuple[str, Path_], client: httpx.AsyncClient, make_key: KeyFactory,
              pg_url: str, tmp_path: Path, fields: dict[str, Any], *,
              base: dict[str, Any] | None = None, **limits: Any) -> Outcome:
    """Run ``fields`` through ``path`` with a key in a fresh org (limited by ``limits``:
    scopes, projects, namespaces)."""
    owner = await make_key()
    key = await make_key(org=owner.org, **limits) if limits else owner
    return await path[1](Ctx(client, key, owner, pg_url, tmp_path, base or {}), fields)


def skip_on(path: tuple[str, Path_], *names: str, why: str) -> None:
    if path[0] in names:
        pytest.skip(why)


async def test_secrets_are_redacted_before_storage(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {
        "content": f"{GOOD} The deploy bot authenticates with {SECRET}.",
        "name": f"Staging DB and {SECRET}",
        "metadata": {"token": SECRET, "nested": {"note": f"use {SECRET}"}},
    })
    assert not out.refused, out
    assert out.row is not None
    assert SECRET not in json.dumps(out.row, default=str)
    assert "REDACTED" in out.row["content"]


@pytest.mark.parametrize("literal", [float("nan"), float("inf"), float("-inf")])
async def test_non_finite_metadata_is_refused(path, client, make_key, pg_url, tmp_path, literal) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {"metadata": {"x": [1, literal]}})
    assert out.refused and out.status == 422, out
    assert out.field in ("metadata", "file"), out


@pytest.mark.parametrize("field", ["valid_at", "expires_at"])
async def test_times_past_year_9999_in_utc_are_refused(path, client, make_key, pg_url, tmp_path, field) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {field: BEYOND})
    assert out.refused and out.status == 422, out
    assert out.field in (field, "file"), out


async def test_nul_in_content_is_refused(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {"content": GOOD + "\x00"})
    assert out.refused, out


async def test_a_project_holding_a_secret_is_refused(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {"project": "AKIAIOSFODNN7EXAMPLK"})
    assert out.refused, out
    assert out.field in ("project", "file"), out


async def test_a_namespace_holding_a_secret_is_refused(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The request models check the grammar only; the domain refuses the secret, on each path.
    skip_on(path, "patch", why="a PATCH does not move a memory to another namespace")
    out = await run(path, client, make_key, pg_url, tmp_path, {"namespace": "w:AKIAIOSFODNN7EXAMPLK"})
    assert out.refused, out
    assert out.field in ("namespace", "file"), out


async def test_a_fragment_is_refused_by_the_gate(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    skip_on(path, "artifact", why="an artifact's summary is its own, not gated")
    out = await run(path, client, make_key, pg_url, tmp_path, {"content": "ok thanks"})
    assert out.refused, out


async def test_a_good_write_is_stored_as_sent(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {
        "tags": ["db", "staging"], "metadata": {"port": 5433}, "valid_at": "2026-03-01T10:00:00Z",
    })
    assert not out.refused, out
    assert out.row is not None
    assert out.row["content"] == GOOD
    assert out.row["metadata"] == {"port": 5433}
    assert out.row["tags"] == ["db", "staging"]
    assert out.row["valid_at"].isoformat().startswith("2026-03-01T10:00:00")


async def test_oversize_content_is_refused(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = await run(path, client, make_key, pg_url, tmp_path, {"content": GOOD + " more" * 6000})
    assert out.refused and out.status == 422, out


async def test_the_same_content_twice_is_one_current_memory(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    skip_on(path, "artifact", why="two artifacts with one summary are two memories")
    owner = await make_key()
    first = await client.post("/v1/remember", json={"namespace": "w", "content": GOOD},
                              headers=owner.headers)
    assert first.status_code == 201
    ctx = Ctx(client, owner, owner, pg_url, tmp_path, {})
    out = await path[1](ctx, {})
    assert out.status < 500, out
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT id FROM memories WHERE org_id = %s AND content = %s AND superseded_by IS NULL",
            (owner.org_id, GOOD),
        ).fetchall()
    assert [r[0] for r in rows] == [uuid.UUID(first.json()["id"])]


async def test_a_key_limited_to_projects_writes_only_into_them(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    skip_on(path, "import", why="an import runs as the operator")
    out = await run(path, client, make_key, pg_url, tmp_path, {"project": "elsewhere"},
                    base={"project": "mine"}, projects=["mine"])
    assert out.refused and out.status == 403, out


async def test_a_read_only_key_writes_nothing(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    skip_on(path, "import", why="an import runs as the operator")
    out = await run(path, client, make_key, pg_url, tmp_path, {}, scopes=["read"])
    assert out.refused and out.status == 403, out


# --- the audit row: each path writes its call's row last, in the write's own transaction
# (the callers, not writes/apply.py: the row is the call's, and its shape is the operation's;
# see docs/architecture.md "How a write runs"). These hold the rows to one rule on every path.

ACTION = {"remember": "remember", "batch": "remember_batch", "keyed": "remember",
          "patch": "memory_update", "import": "import", "artifact": "artifact"}


def audit_rows(url: str, org_id: uuid.UUID, action: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT outcome, status_code, memory_ids, request::text, details::text, redaction_count"
            " FROM audit_events WHERE org_id = %s AND action = %s ORDER BY created_at",
            (org_id, action),
        ).fetchall()


async def test_a_stored_write_leaves_one_audit_row_of_its_call(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    owner = await make_key()
    out = await path[1](Ctx(client, owner, owner, pg_url, tmp_path, {}), {})
    assert not out.refused and out.id is not None, out
    rows = audit_rows(pg_url, owner.org_id, ACTION[path[0]])
    assert len(rows) == 1, rows
    outcome, status, memory_ids, _, details, redactions = rows[0]
    assert status in (200, 201) and outcome in ("ok", "created", "updated"), rows[0]
    assert memory_ids == [uuid.UUID(out.id)]  # an import's row names what it stored, too
    assert redactions == 0
    if path[0] == "import":
        assert json.loads(details)["created"] == 1  # and counts it


async def test_a_secret_in_a_write_never_reaches_the_audit_trail(path, client, make_key, pg_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    owner = await make_key()
    fields = {"content": f"{GOOD} The deploy bot authenticates with {SECRET}.",
              "name": f"Staging DB and {SECRET}", "metadata": {"token": SECRET}}
    out = await path[1](Ctx(client, owner, owner, pg_url, tmp_path, {}), fields)
    assert not out.refused, out
    rows = audit_rows(pg_url, owner.org_id, ACTION[path[0]])
    assert rows and all(SECRET not in f"{r[3]} {r[4]}" for r in rows), rows
    # The row counts the redactions it made: the same three (content, name, metadata) on
    # every path, and names the memory it stored.
    assert rows[-1][5] == 3, rows[-1]
    assert rows[-1][2] == [uuid.UUID(out.id or "")]
