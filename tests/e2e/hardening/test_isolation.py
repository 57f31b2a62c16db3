"""Tenant isolation, property-based: hypothesis draws two orgs' memories (namespaces with
look-alike segments, projects), a key in the first org limited to drawn projects and
namespace prefixes, and checks that no call, over HTTP or MCP, returns, links to or changes a
memory outside that key's reach, and that no error message carries another tenant's data.

Reach (the rule the service promises): the key's org; when the key has projects, memories of
those projects or of none; when it has namespace prefixes, memories at a prefix or under it,
segment-wise (``alice`` covers ``alice:s1``, not ``alicex``). A context pack at ``u:s:t``
further narrows that to ``u``, ``u:s`` and ``u:s:t``: ancestors only, no sibling.

Write reach is narrower: a key limited to projects changes, supersedes and erases only
memories of its projects, never a shared (project-less) one (403), and writes new memories
only into its projects. Every write path (remember, batch, PATCH, supersedes, related,
artifacts) answers without an id or name outside the key's read reach, whatever its
duplicate checks found.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from service.domain import keys as key_service
from service.domain.namespaces import ancestors, within_prefix
from tests.conftest import AppFactory, Key, McpConnect, SqlRows

# Few segments, chosen to trip string-wise prefix checks and LIKE wildcards: "al" and "alice"
# are string prefixes of "alicex", "s1" of "s1x"; "a_b" LIKE-matches "a-b", "s_" matches "s1".
USERS = ["al", "alice", "alicex", "a_b", "a-b"]
SESSIONS = ["s1", "s1x", "s_"]
TASKS = ["t1", "t2"]
PROJECTS = ["p1", "p2"]

NAMESPACES = st.one_of(
    st.sampled_from(USERS),
    st.builds(lambda u, s: f"{u}:{s}", st.sampled_from(USERS), st.sampled_from(SESSIONS)),
    st.builds(
        lambda u, s, t: f"{u}:{s}:{t}",
        st.sampled_from(USERS),
        st.sampled_from(SESSIONS),
        st.sampled_from(TASKS),
    ),
)
MEMORY_SPECS = st.lists(
    st.tuples(st.sampled_from([0, 1]), NAMESPACES, st.sampled_from([None, *PROJECTS])),
    min_size=1,
    max_size=8,
)
KEY_PROJECTS = st.lists(st.sampled_from(PROJECTS), unique=True, max_size=2)
KEY_PREFIXES = st.lists(NAMESPACES, unique=True, max_size=2)

# The traps, always tried before the drawn examples: string-prefix look-alikes ("alice" vs
# "alicex", "s1" vs "s1x"), a LIKE wildcard in a prefix ("a_b" vs "a-b"), project limits.
TRAP_SPECS = [
    (0, "alicex", None),
    (0, "alice:s1x", "p2"),
    (0, "alice:s1:t1", None),
    (0, "a-b", "p1"),
    (0, "alice", "p1"),
    (1, "alice", None),
    (1, "alice:s1", "p1"),
]
TRAP_KEY = {"specs": TRAP_SPECS, "projects": ["p1"], "prefixes": ["alice:s1", "a_b"]}

HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Mem:
    id: uuid.UUID
    org: int
    namespace: str
    project: str | None
    marker: str
    hub: bool = False
    artifact: uuid.UUID | None = None  # for an artifact's memory: the artifact's id


@dataclass
class World:
    orgs: list[uuid.UUID]
    admins: list[Key]
    subject: Key
    projects: list[str]
    prefixes: list[str]
    mems: list[Mem] = field(default_factory=list)

    def reaches(self, m: Mem) -> bool:
        return (
            m.org == 0
            and (not self.projects or m.project is None or m.project in self.projects)
            and (not self.prefixes or any(within_prefix(m.namespace, p) for p in self.prefixes))
        )

    def writes(self, m: Mem) -> bool:
        """Write reach: read reach, and for a key limited to projects, one of them."""
        return self.reaches(m) and (not self.projects or m.project in self.projects)

    def read_along(self, m: Mem) -> bool:
        """Whether every reader of ``m`` reads what the subject writes (at its writable
        namespace, in its write project): superseding ``m`` takes that."""
        project = self.write_project()
        return m.namespace == self.writable_namespace() and (
            project is None or project == m.project
        )

    def write_project(self) -> str | None:
        """The project the subject writes into: its first, or none for an unlimited key."""
        return self.projects[0] if self.projects else None

    def by_id(self) -> dict[uuid.UUID, Mem]:
        return {m.id: m for m in self.mems}

    def writable_namespace(self) -> str:
        return self.prefixes[0] if self.prefixes else "alice"

    def assert_no_foreign_data(self, text: str) -> None:
        """An answer to the subject carries no marker of a memory outside its reach."""
        for m in self.mems:
            if not self.reaches(m):
                assert m.marker not in text, f"leaked {m.namespace} {m.project} org {m.org}"

    def assert_no_foreign_ids(self, text: str) -> None:
        """Nor its id, nor its artifact's id."""
        for m in self.mems:
            if not self.reaches(m):
                assert str(m.id) not in text, f"leaked the id of {m.namespace} {m.project}"
                if m.artifact:
                    assert str(m.artifact) not in text


async def _key(app: FastAPI, org: str, projects: list[str], prefixes: list[str]) -> Key:
    async with app.state.ctx.sessionmaker() as session:
        created = await key_service.create_key(
            session,
            org=org,
            scopes=["read", "write"],
            projects=projects,
            namespace_prefixes=prefixes,
        )
        await session.commit()
    return Key(created.key, created.key_id, created.org_id, org)


def _content(marker: str, namespace: str, project: str | None) -> str:
    return (
        f"Release note {marker}: the {namespace.replace(':', ' ')} team pinned the build "
        f"cache for {project or 'every project'} to the shared runner after the March outage."
    )


async def build_world(
    app: FastAPI,
    client: httpx.AsyncClient,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
) -> World:
    """Two orgs with the drawn memories, plus in each org a hub memory linked to all of the
    org's others; the subject key in org 0; an unrestricted admin key in each org."""
    names = [f"iso-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    admins = [await _key(app, n, [], []) for n in names]
    subject = await _key(app, names[0], projects, prefixes)
    world = World([a.org_id for a in admins], admins, subject, projects, prefixes)
    for org in (0, 1):
        items, pending = [], []
        for ns, project in [(ns, p) for o, ns, p in specs if o == org]:
            marker = uuid.uuid4().hex[:12]
            pending.append((ns, project, marker))
            items.append(
                {"namespace": ns, "project": project, "content": _content(marker, ns, project)}
            )
        if items:
            response = await client.post(
                "/v1/remember/batch", json={"items": items}, headers=admins[org].headers
            )
            assert response.status_code == 200, response.text
            for (ns, project, marker), result in zip(
                pending, response.json()["items"], strict=True
            ):
                assert result["status"] == "created", result
                world.mems.append(Mem(uuid.UUID(result["id"]), org, ns, project, marker))
        org_ids = [str(m.id) for m in world.mems if m.org == org]
        hub_ns, hub_project = specs[0][1], specs[-1][2]
        marker = uuid.uuid4().hex[:12]
        hub = await client.post(
            "/v1/remember",
            json={
                "namespace": hub_ns,
                "project": hub_project,
                "type": "decision",
                "content": _content(marker, hub_ns, hub_project) + " It links the rest.",
                "related": [{"id": i, "relationship": "depends_on"} for i in org_ids],
            },
            headers=admins[org].headers,
        )
        assert hub.status_code == 201, hub.text
        world.mems.append(
            Mem(uuid.UUID(hub.json()["id"]), org, hub_ns, hub_project, marker, hub=True)
        )
        if not _has_route(app, "/v1/artifacts"):
            continue
        art_ns, art_project = specs[-1][1], specs[0][2]
        marker = uuid.uuid4().hex[:12]
        artifact = await client.post(
            "/v1/artifacts",
            json={
                "namespace": art_ns,
                "project": art_project,
                "name": f"Runner inventory {marker}",
                "summary": f"Runner inventory {marker}: build cache hosts after the March outage",
                "body": {"marker": marker, "hosts": [{"name": "r1", "disk": "nvme"}]},
            },
            headers=admins[org].headers,
        )
        assert artifact.status_code == 201, artifact.text
        created = artifact.json()
        world.mems.append(
            Mem(
                uuid.UUID(created["memory_id"]),
                org,
                art_ns,
                art_project,
                marker,
                artifact=uuid.UUID(created["artifact_id"]),
            )
        )
    return world


def specs_namespaces(specs: list[tuple[int, str, str | None]]) -> set[str]:
    return {ns for _, ns, _ in specs}


def expected_related(world: World, m: Mem) -> set[uuid.UUID]:
    """The one-hop neighbours of ``m`` the subject may see."""
    if m.artifact:
        return set()
    peers = [x for x in world.mems if x.org == m.org and x.id != m.id and not x.artifact]
    linked = peers if m.hub else [x for x in peers if x.hub]
    return {x.id for x in linked if world.reaches(x)}


# --- get, patch, delete, related: HTTP and MCP ---------------------------------------------------


@HYPOTHESIS
@given(specs=MEMORY_SPECS, projects=KEY_PROJECTS, prefixes=KEY_PREFIXES)
@example(**TRAP_KEY)
@example(specs=TRAP_SPECS, projects=[], prefixes=["alice"])
async def test_get_patch_delete_stay_within_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    mcp_connect: McpConnect,
    sql: SqlRows,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
) -> None:
    world = await build_world(app, client, specs, projects, prefixes)
    h = world.subject.headers
    for m in world.mems:
        got = await client.get(f"/v1/memories/{m.id}", headers=h)
        patched = await client.patch(f"/v1/memories/{m.id}", json={"tags": ["touched"]}, headers=h)
        if world.reaches(m):
            assert got.status_code == 200, got.text
            assert m.marker in got.json()["content"] + got.json()["name"]
            related = {uuid.UUID(r["id"]) for r in got.json()["related"]}
            assert related == expected_related(world, m)
            if world.writes(m):
                assert patched.status_code == 200, patched.text
            else:  # a shared memory, for a key limited to projects: readable, not writable
                assert patched.status_code == 403, patched.text
                assert patched.json()["error"]["code"] == "project_access_denied"
        else:
            assert got.status_code == 404, (m, got.text)
            assert patched.status_code == 404, (m, patched.text)
            assert got.json() == {
                "error": {"code": "not_found", "message": f"memory {m.id} not found"}
            }
        world.assert_no_foreign_data(got.text + patched.text)

    for m in world.mems:
        if m.artifact is None:
            continue
        read = await client.get(f"/v1/artifacts/{m.artifact}", headers=h)
        assert read.status_code == (200 if world.reaches(m) else 404), (m, read.text)
        world.assert_no_foreign_data(read.text)
        for at in {m.namespace, *specs_namespaces(specs)}:
            read = await client.get(
                f"/v1/artifacts/{m.artifact}",
                params={"namespace": at, "fields": "marker"},
                headers=h,
            )
            world.assert_no_foreign_data(read.text)
            if read.status_code == 200:
                assert world.reaches(m)
                assert m.namespace in ancestors(at)
                assert read.json()["fields"] == {"marker": m.marker}
            else:
                assert read.status_code in (403, 404), read.text
                assert (
                    not world.reaches(m)
                    or m.namespace not in ancestors(at)
                    or read.status_code == 403
                )

    outside = [m for m in world.mems if not world.reaches(m)]
    inside = [m for m in world.mems if world.writes(m)]
    read_only = [m for m in world.mems if world.reaches(m) and not world.writes(m)]
    async with mcp_connect(world.subject) as mcp:
        for m in read_only:
            deleted = await client.delete(f"/v1/memories/{m.id}", headers=h)
            assert deleted.status_code == 403, deleted.text
            forgot = await mcp.call_tool("forget", {"id": str(m.id)})
            assert forgot.structured_content["error"]["code"] == "project_access_denied"
        for m in outside:
            deleted = await client.delete(f"/v1/memories/{m.id}", headers=h)
            assert deleted.status_code == 404
            forgot = await mcp.call_tool("forget", {"id": str(m.id)})
            assert forgot.is_error
            assert forgot.structured_content["error"]["code"] == "not_found"
            world.assert_no_foreign_data(deleted.text + json.dumps(forgot.structured_content))
        if inside:
            forgot = await mcp.call_tool("forget", {"id": str(inside[0].id)})
            assert not forgot.is_error, forgot
        if len(inside) > 1:
            assert (
                await client.delete(f"/v1/memories/{inside[1].id}", headers=h)
            ).status_code == 200

    rows = {
        r.id: r
        for r in await sql(
            "SELECT id, tags FROM memories WHERE org_id = ANY(:orgs)", orgs=world.orgs
        )
    }
    for m in outside + read_only:
        assert m.id in rows, "a memory out of reach was deleted"
        assert "touched" not in rows[m.id].tags, "a memory out of reach was changed"
    for m in inside[:2]:
        assert m.id not in rows
    for m in inside[2:]:
        assert rows[m.id].tags == ["touched"]


# --- list: HTTP and MCP --------------------------------------------------------------------------

FILTERS = st.one_of(
    st.none(),
    st.just("*"),
    NAMESPACES,
    NAMESPACES.map(lambda ns: ns + ":*"),
)


def _list_matches(namespace: str | None, project: str | None, m: Mem) -> bool:
    if project is not None and m.project != project:
        return False
    if namespace is None or namespace == "*":
        return True
    if namespace.endswith(":*"):
        return within_prefix(m.namespace, namespace[:-2])
    return m.namespace == namespace


@HYPOTHESIS
@given(
    specs=MEMORY_SPECS,
    projects=KEY_PROJECTS,
    prefixes=KEY_PREFIXES,
    filters=st.lists(
        st.tuples(FILTERS, st.sampled_from([None, *PROJECTS])), min_size=1, max_size=3
    ),
)
@example(**TRAP_KEY, filters=[(None, None), ("alice:*", "p1"), ("a-b", None)])
@example(specs=TRAP_SPECS, projects=[], prefixes=["alice"], filters=[("*", None), ("al:*", None)])
async def test_list_returns_exactly_what_is_in_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    mcp_connect: McpConnect,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
    filters: list[tuple[str | None, str | None]],
) -> None:
    world = await build_world(app, client, specs, projects, prefixes)
    async with mcp_connect(world.subject) as mcp:
        for namespace, project in filters:
            params = {k: v for k, v in {"namespace": namespace, "project": project}.items() if v}
            response = await client.get(
                "/v1/memories", params={**params, "limit": 200}, headers=world.subject.headers
            )
            tool = await mcp.call_tool("list_memories", {**params, "limit": 200, "max_bytes": None})
            world.assert_no_foreign_data(response.text + json.dumps(tool.structured_content))
            exact = namespace is not None and not namespace.endswith("*")
            if exact and prefixes and not any(within_prefix(namespace, p) for p in prefixes):
                assert response.status_code == 403
                assert response.json()["error"]["code"] == "namespace_access_denied"
                assert tool.structured_content["error"]["code"] == "namespace_access_denied"
                continue
            if project is not None and projects and project not in projects:
                assert response.status_code == 403
                assert response.json()["error"]["code"] == "project_access_denied"
                assert tool.structured_content["error"]["code"] == "project_access_denied"
                continue
            assert response.status_code == 200, response.text
            want = {
                m.id
                for m in world.mems
                if world.reaches(m) and _list_matches(namespace, project, m)
            }
            got = {uuid.UUID(i["id"]) for i in response.json()["items"]}
            assert got == want
            assert response.json()["total"] == len(want)
            assert not tool.is_error, tool
            assert {uuid.UUID(i["id"]) for i in tool.structured_content["items"]} == want


# --- links: remember with related and supersedes ---------------------------------------------------


@HYPOTHESIS
@given(specs=MEMORY_SPECS, projects=KEY_PROJECTS, prefixes=KEY_PREFIXES)
@example(**TRAP_KEY)
async def test_remember_links_only_within_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    mcp_connect: McpConnect,
    sql: SqlRows,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
) -> None:
    world = await build_world(app, client, specs, projects, prefixes)
    namespace = world.writable_namespace()
    created: list[uuid.UUID] = []
    async with mcp_connect(world.subject) as mcp:
        for i, m in enumerate(world.mems):
            body: dict[str, Any] = {
                "namespace": namespace,
                "project": world.write_project(),
                "content": f"Follow-up {uuid.uuid4().hex[:8]}: the runner cache moved to NVMe disks.",
                "related": [{"id": str(m.id)}],
            }
            if i % 2:
                body["supersedes"] = str(m.id)
                body.pop("related")
            if i % 3 == 2:  # the same call over MCP
                result = await mcp.call_tool("remember", body)
                status = result.structured_content["error"]["status"] if result.is_error else 201
                text = json.dumps(result.structured_content)
                new_id = None if result.is_error else result.structured_content["id"]
            else:
                response = await client.post(
                    "/v1/remember", json=body, headers=world.subject.headers
                )
                status, text = response.status_code, response.text
                new_id = response.json().get("id")
            world.assert_no_foreign_data(text)
            superseding = "supersedes" in body
            if world.reaches(m) and (
                not superseding or (world.writes(m) and world.read_along(m))
            ):
                assert status == 201, text
                created.append(uuid.UUID(new_id))
            elif world.reaches(m) and not world.writes(m):  # superseding takes write reach
                assert status == 403, text
                assert "project_access_denied" in text
            elif world.reaches(m):  # its readers could not see the replacement
                assert status == 422, text
                assert "would hide it from readers" in text
            else:
                assert status == 422, text
                assert "out of reach" in text
    not_writable = [m.id for m in world.mems if not world.writes(m)]
    superseded = await sql(
        "SELECT id FROM memories WHERE id = ANY(:ids) AND superseded_by IS NOT NULL",
        ids=not_writable,
    )
    assert superseded == [], "a memory outside write reach was superseded"
    outside = [m.id for m in world.mems if not world.reaches(m)]
    # Nothing points at a memory out of reach: no edge, no superseded_by.
    edges = await sql(
        "SELECT target_id FROM relations WHERE org_id = ANY(:orgs) AND source_id = ANY(:new)",
        orgs=world.orgs,
        new=created,
    )
    assert not {e.target_id for e in edges} & set(outside)
    superseded = await sql(
        "SELECT id FROM memories WHERE id = ANY(:ids) AND superseded_by IS NOT NULL", ids=outside
    )
    assert superseded == []


# --- the audit trail -----------------------------------------------------------------------------


async def _audit_world(
    app: FastAPI,
    client: httpx.AsyncClient,
    specs: list[Any],
    projects: list[str],
    prefixes: list[str],
) -> tuple[World, list[dict[str, Any]]]:
    """A world, some traffic of the subject's and of each org's admin, and the audit rows
    the subject can list."""
    world = await build_world(app, client, specs, projects, prefixes)
    await client.get("/v1/memories", headers=world.subject.headers)
    for m in world.mems:
        await client.get(f"/v1/memories/{m.id}", headers=world.admins[m.org].headers)
    for org, namespace in sorted({(m.org, m.namespace) for m in world.mems}):
        await client.get(
            "/v1/memories", params={"namespace": namespace}, headers=world.admins[org].headers
        )
    page = await client.get(
        "/v1/audit", params={"limit": 500, "full": "true"}, headers=world.subject.headers
    )
    assert page.status_code == 200, page.text
    world.assert_no_foreign_data(page.text)
    return world, page.json()["items"]


@HYPOTHESIS
@given(specs=MEMORY_SPECS, projects=KEY_PROJECTS, prefixes=KEY_PREFIXES)
@example(**TRAP_KEY)
async def test_audit_listing_stays_within_the_keys_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
) -> None:
    world, rows = await _audit_world(app, client, specs, projects, prefixes)
    assert rows
    reach = {m.id for m in world.mems if world.reaches(m)}
    for row in rows:
        own = row["key_id"] == str(world.subject.key_id)
        if not own:
            assert {uuid.UUID(i) for i in row["memory_ids"]} <= reach, row
        if prefixes and not own:
            assert row["namespace"] is not None
            assert any(within_prefix(row["namespace"], p) for p in prefixes)
    # The other org's rows are not found by id either.
    theirs = await client.get("/v1/audit", params={"limit": 5}, headers=world.admins[1].headers)
    assert theirs.json()["items"]
    for row in theirs.json()["items"]:
        response = await client.get(f"/v1/audit/{row['id']}", headers=world.subject.headers)
        assert response.status_code == 404


async def test_audit_rows_of_other_projects_are_not_listed(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    world, rows = await _audit_world(app, client, TRAP_SPECS, ["p1"], [])
    reach = {m.id for m in world.mems if world.reaches(m)}
    for row in rows:
        if row["key_id"] != str(world.subject.key_id):
            assert {uuid.UUID(i) for i in row["memory_ids"]} <= reach, row


async def test_audit_rows_of_queued_reads_stay_within_the_keys_reach(app_with: AppFactory) -> None:
    """With read_audit = queued (rows written only when the trail is read, or at shutdown),
    the listing holds the subject's own reads and nothing out of its reach; another org's
    rows are not found by id."""
    held = {"read_audit": "queued", "read_audit_flush_ms": 600_000}
    async with app_with(**held) as client:
        app = client.app  # type: ignore[attr-defined]
        world, rows = await _audit_world(app, client, **TRAP_KEY)
        assert any(r["action"] == "list" and r["key_id"] == str(world.subject.key_id) for r in rows)
        reach = {m.id for m in world.mems if world.reaches(m)}
        for row in rows:
            if row["key_id"] != str(world.subject.key_id):
                assert {uuid.UUID(i) for i in row["memory_ids"]} <= reach, row
                assert any(within_prefix(row["namespace"], p) for p in TRAP_KEY["prefixes"])
        theirs = await client.get("/v1/audit", headers=world.admins[1].headers)
        assert theirs.json()["items"]
        for row in theirs.json()["items"]:
            response = await client.get(f"/v1/audit/{row['id']}", headers=world.subject.headers)
            assert response.status_code == 404


# --- context packs (once POST /v1/context exists) --------------------------------------------------


def _has_route(app: FastAPI, path: str) -> bool:
    return path in app.openapi()["paths"]


@HYPOTHESIS
@given(
    specs=MEMORY_SPECS,
    projects=KEY_PROJECTS,
    prefixes=KEY_PREFIXES,
    at=NAMESPACES,
    project=st.sampled_from([None, *PROJECTS]),
)
@example(**TRAP_KEY, at="alice:s1:t2", project="p1")
@example(specs=TRAP_SPECS, projects=[], prefixes=[], at="alice:s1x", project=None)
async def test_context_sees_only_ancestors_within_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
    at: str,
    project: str | None,
) -> None:
    if not _has_route(app, "/v1/context"):
        return  # not built yet: nothing to check
    world = await build_world(app, client, specs, projects, prefixes)
    body: dict[str, Any] = {
        "goal": "release note build cache shared runner March outage",
        "namespace": at,
        "layer": "deep_search",
        "limit": 50,
        "include_related": True,
        "related_limit": 50,
    }
    if project:
        body["project"] = project
    response = await client.post("/v1/context", json=body, headers=world.subject.headers)
    world.assert_no_foreign_data(response.text)
    if prefixes and not any(within_prefix(at, p) for p in prefixes):
        assert response.status_code == 403, response.text
        return
    if project and projects and project not in projects:
        assert response.status_code == 403, response.text
        return
    assert response.status_code == 200, response.text
    visible = set(ancestors(at))
    mems = world.by_id()

    def allowed(m: Mem) -> bool:
        return (
            world.reaches(m)
            and m.namespace in visible
            and (project is None or m.project in (None, project))
        )

    for section in response.json()["sections"]:
        for item in section["items"]:
            m = mems[uuid.UUID(item["id"])]
            assert allowed(m), (at, m)
            for rel in item.get("related", []):
                assert allowed(mems[uuid.UUID(rel["id"])]), (at, rel)


# --- write paths of a project-limited key: no id or name outside reach ---------------------------


KEY_PROJECTS_SOME = st.lists(st.sampled_from(PROJECTS), unique=True, min_size=1, max_size=2)


def _copy_namespace(world: World, m: Mem) -> str:
    """Where the subject writes to meet ``m`` in a duplicate check: its namespace if the key
    may write there, else the key's own."""
    if not world.prefixes or any(within_prefix(m.namespace, p) for p in world.prefixes):
        return m.namespace
    return world.writable_namespace()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=MEMORY_SPECS, projects=KEY_PROJECTS_SOME, prefixes=KEY_PREFIXES)
@example(**TRAP_KEY)
@example(specs=TRAP_SPECS, projects=["p2"], prefixes=[])
async def test_write_paths_never_answer_with_data_out_of_reach(
    app: FastAPI,
    client: httpx.AsyncClient,
    mcp_connect: McpConnect,
    sql: SqlRows,
    specs: list[tuple[int, str, str | None]],
    projects: list[str],
    prefixes: list[str],
) -> None:
    world = await build_world(app, client, specs, projects, prefixes)
    h = world.subject.headers
    project = world.write_project()
    answers: list[str] = []

    # 1. Near duplicates: the same template, a marker of the subject's own. Every memory of
    # the namespace is similar; only those within reach may be named. (Before any copy of
    # a foreign text is stored, so every marker in an answer is someone else's.)
    async with mcp_connect(world.subject) as mcp:
        for i, m in enumerate(world.mems):
            ns = _copy_namespace(world, m)
            body = {
                "namespace": ns,
                "project": project,
                "content": _content(uuid.uuid4().hex[:12], ns, m.project),
            }
            if i % 2:
                result = await mcp.call_tool("remember", body)
                assert not result.is_error, result
                text = json.dumps(result.structured_content)
            else:
                response = await client.post("/v1/remember", json=body, headers=h)
                assert response.status_code == 201, response.text
                text = response.text
            world.assert_no_foreign_data(text)
            world.assert_no_foreign_ids(text)

    # 2. Exact copies (the answer's name is the subject's own, so ids only from here on):
    # PATCH an own memory to each text, remember it, and send them all in one batch.
    copies = [
        {"namespace": _copy_namespace(world, m), "project": project,
         "content": _content(m.marker, m.namespace, m.project)}
        for m in world.mems
        if not m.artifact
    ]
    for copy in copies:
        own = await client.post(
            "/v1/remember",
            json={**copy, "content": _content(uuid.uuid4().hex[:12], "own", None) + " Mine."},
            headers=h,
        )
        assert own.status_code == 201, own.text
        patched = await client.patch(
            f"/v1/memories/{own.json()['id']}", json={"content": copy["content"]}, headers=h
        )
        assert patched.status_code in (200, 409), patched.text
        answers.append(patched.text)
        response = await client.post("/v1/remember", json=copy, headers=h)
        assert response.status_code == 201, response.text
        answers.append(response.text)
    batch = await client.post("/v1/remember/batch", json={"items": copies}, headers=h)
    assert batch.status_code == 200, batch.text
    answers.append(batch.text)

    # 3. Re-projecting an own memory: only into the key's projects.
    own = await client.post(
        "/v1/remember",
        json={"namespace": world.writable_namespace(), "project": project,
              "content": "Runner caches are pruned weekly by the platform team's cron job."},
        headers=h,
    )
    for target in [None, *PROJECTS]:
        moved = await client.patch(
            f"/v1/memories/{own.json()['id']}", json={"project": target}, headers=h
        )
        assert moved.status_code == (200 if target in projects else 403), moved.text
        answers.append(moved.text)

    # 4. Artifacts: stored only in the key's projects; erased only within write reach.
    stored = await client.post(
        "/v1/artifacts",
        json={"namespace": world.writable_namespace(), "project": project, "name": "Inventory",
              "body": {"hosts": 1}},
        headers=h,
    )
    assert stored.status_code == 201, stored.text
    shared = await client.post(
        "/v1/artifacts",
        json={"namespace": world.writable_namespace(), "name": "Inventory", "body": {}},
        headers=h,
    )
    assert shared.status_code == 403
    for m in world.mems:
        if m.artifact is None:
            continue
        deleted = await client.delete(f"/v1/artifacts/{m.artifact}", headers=h)
        want = 200 if world.writes(m) else 403 if world.reaches(m) else 404
        assert deleted.status_code == want, (m, deleted.text)
        world.assert_no_foreign_data(deleted.text)
        if want == 404:  # echoes the id it was sent, and no more
            assert deleted.json() == {"error": {
                "code": "not_found", "message": f"Artifact not found: {m.artifact}",
                "field": "artifact_id"}}
        else:
            answers.append(deleted.text)

    for text in answers:
        world.assert_no_foreign_ids(text)
    # Nothing out of the key's write reach changed.
    rows = await sql(
        "SELECT id FROM memories WHERE org_id = ANY(:orgs) AND superseded_by IS NOT NULL",
        orgs=world.orgs,
    )
    assert not {r.id for r in rows} & {m.id for m in world.mems if not world.writes(m)}
    left = {r.id for r in await sql("SELECT id FROM artifacts WHERE org_id = ANY(:orgs)", orgs=world.orgs)}
    for m in world.mems:
        if m.artifact and not world.writes(m):
            assert m.artifact in left
