"""GET /v1/audit and GET /v1/audit/{id}: filters, paging, cursors, limits and isolation."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import Key, KeyFactory
from tests.domain.audit import conftest as trail_fixtures
from tests.domain.audit.conftest import Seed

# the audit trail's seed fixture here, not the root conftest's (memories for packs)
seed = trail_fixtures.seed


async def _list(client: httpx.AsyncClient, key: Key, **params: Any) -> dict[str, Any]:
    response = await client.get("/v1/audit", headers=key.headers, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _ids(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["items"]]


async def test_lists_newest_first_with_offset_paging(
    client: httpx.AsyncClient, key: Key, seed: Seed
) -> None:
    ids = [str(await seed(key.org_id, minutes=i)) for i in range(7)]
    newest_first = ids[::-1]

    first = await _list(client, key, limit=3)
    assert _ids(first) == newest_first[:3]
    assert (first["offset"], first["limit"], first["total"], first["has_more"]) == (0, 3, 7, True)

    last = await _list(client, key, limit=3, offset=6)
    assert _ids(last) == newest_first[6:]
    assert last["has_more"] is False
    assert last["next_cursor"] is None

    beyond = await _list(client, key, limit=3, offset=10)
    assert beyond["items"] == []
    assert beyond["total"] == 7
    assert beyond["has_more"] is False


async def test_cursor_walks_every_row_once_while_rows_are_added(
    client: httpx.AsyncClient, key: Key, seed: Seed
) -> None:
    # Several rows share a timestamp: the keyset breaks ties on id.
    ids = {str(await seed(key.org_id, minutes=i // 2)) for i in range(9)}
    seen: list[str] = []
    page = await _list(client, key, limit=4)
    seen += _ids(page)
    while page["next_cursor"]:
        # A newer call recorded meanwhile must not shift the pages.
        ids.add(str(await seed(key.org_id, minutes=100 + len(seen))))
        page = await _list(client, key, limit=4, cursor=page["next_cursor"])
        seen += _ids(page)
    assert len(seen) == len(set(seen)) == 9
    assert set(seen) < ids


async def test_filters(client: httpx.AsyncClient, key: Key, seed: Seed) -> None:
    other_key = uuid.uuid4()
    memory = uuid.uuid4()
    rows = {
        "alice": await seed(key.org_id, 1, namespace="alice", key_id=key.key_id),
        "alice_s1": await seed(
            key.org_id, 2, namespace="alice:s1", action="context", memory_ids=[memory]
        ),
        "alice_s1_t": await seed(key.org_id, 3, namespace="alice:s1:t", outcome="rejected"),
        "alicex": await seed(key.org_id, 4, namespace="alicex", key_id=other_key),
        "a_b": await seed(key.org_id, 5, namespace="a_b", action="delete", memory_ids=[memory]),
        "axb": await seed(key.org_id, 6, namespace="axb"),
        "none": await seed(key.org_id, 7, action="auth_refused", outcome="refused"),
    }

    async def ids(**params: Any) -> set[uuid.UUID]:
        return {uuid.UUID(i) for i in _ids(await _list(client, key, limit=100, **params))}

    def named(*names: str) -> set[uuid.UUID]:
        return {rows[n] for n in names}

    assert await ids() == named(*rows)
    assert await ids(namespace="alice") == named("alice", "alice_s1", "alice_s1_t")
    assert await ids(namespace="alice:*") == named("alice", "alice_s1", "alice_s1_t")
    assert await ids(namespace="alice:s1") == named("alice_s1", "alice_s1_t")
    assert await ids(namespace="*") == named(*rows)
    # "_" is a LIKE wildcard: a_b must not match axb.
    assert await ids(namespace="a_b") == named("a_b")
    assert await ids(action="context") == named("alice_s1")
    assert await ids(key_id=str(key.key_id)) == named("alice")
    assert await ids(key_id=str(other_key)) == named("alicex")
    assert await ids(memory_id=str(memory)) == named("alice_s1", "a_b")
    assert await ids(memory_id=str(memory), action="delete") == named("a_b")
    assert await ids(outcome="refused") == named("none")
    assert await ids(since="2026-11-01T12:03:00Z") == named(
        "alice_s1_t", "alicex", "a_b", "axb", "none"
    )
    assert await ids(since="2026-11-01T12:03:00Z", until="2026-11-01T12:05:00Z") == named(
        "alice_s1_t", "alicex"
    )
    # No zone means UTC.
    assert await ids(until="2026-11-01T12:02:00") == named("alice")
    body = await _list(client, key, namespace="alice", limit=2)
    assert body["total"] == 3
    assert body["has_more"] is True


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"key_id": "not-a-uuid"}, "key_id"),
        ({"memory_id": "123"}, "memory_id"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-45"}, "until"),
        ({"until": "0.5"}, "until"),
        ({"since": "1700000000"}, "since"),
        ({"since": "2026-11-02", "until": "2026-11-01"}, "until"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"offset": -1}, "offset"),
        ({"namespace": "alice::s1"}, "namespace"),
        ({"namespace": "a:b:c:d"}, "namespace"),
        ({"cursor": "garbage"}, "cursor"),
        ({"cursor": "WyJ4IiwieSJd"}, "cursor"),  # valid base64 of ["x","y"]
        ({"namespace_prefix": "alice"}, "namespace_prefix"),
    ],
)
async def test_bad_filters_get_422_naming_the_field(
    client: httpx.AsyncClient, key: Key, params: dict[str, Any], field: str
) -> None:
    response = await client.get("/v1/audit", headers=key.headers, params=params)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert error["code"] == "validation_error"


async def test_offset_and_cursor_together_are_refused(
    client: httpx.AsyncClient, key: Key, seed: Seed
) -> None:
    for i in range(3):
        await seed(key.org_id, minutes=i)
    cursor = (await _list(client, key, limit=1))["next_cursor"]
    response = await client.get(
        "/v1/audit", headers=key.headers, params={"cursor": cursor, "offset": 1}
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "offset"


async def test_org_isolation(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory, seed: Seed
) -> None:
    other = await make_key()
    mine = await seed(key.org_id, namespace="alice")
    theirs = await seed(other.org_id, namespace="alice", memory_ids=[uuid.uuid4()])

    listed = _ids(await _list(client, key, limit=500))
    assert listed == [str(mine)]
    # Even filters that name the other org's data find nothing.
    assert (await _list(client, key, key_id=str(other.key_id)))["items"] == []
    assert (await client.get(f"/v1/audit/{theirs}", headers=key.headers)).status_code == 404
    assert (await client.get(f"/v1/audit/{mine}", headers=other.headers)).status_code == 404
    assert (await client.get(f"/v1/audit/{theirs}", headers=other.headers)).status_code == 200


async def test_needs_read_or_admin_scope(
    client: httpx.AsyncClient, make_key: KeyFactory, seed: Seed
) -> None:
    writer = await make_key(scopes=["write"])
    audit_id = await seed(writer.org_id)
    for url in ("/v1/audit", f"/v1/audit/{audit_id}"):
        response = await client.get(url, headers=writer.headers)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "scope_denied"
    reader = await make_key(org=writer.org, scopes=["read"])
    assert (await client.get("/v1/audit", headers=reader.headers)).status_code == 200
    admin = await make_key(org=writer.org, scopes=["admin"])
    assert (await client.get(f"/v1/audit/{audit_id}", headers=admin.headers)).status_code == 200
    assert (await client.get("/v1/audit")).status_code == 401


async def test_key_limits_narrow_the_trail(
    client: httpx.AsyncClient, key: Key, make_key: KeyFactory, seed: Seed
) -> None:
    alice_key = await make_key(org=key.org, scopes=["read"], namespaces=["alice"])
    p1_key = await make_key(org=key.org, scopes=["read"], projects=["p1"])
    rows = {
        "alice": await seed(key.org_id, 1, namespace="alice:s1"),
        "alicex": await seed(key.org_id, 2, namespace="alicex"),
        "bob_p1": await seed(key.org_id, 3, namespace="bob", request={"project": "p1"}),
        "bob_p2": await seed(key.org_id, 4, namespace="bob", request={"project": "p2"}),
        "no_ns": await seed(key.org_id, 5),
        # A key always sees its own calls, e.g. one refused outside its prefixes.
        "alice_own": await seed(
            key.org_id, 6, namespace="carol", key_id=alice_key.key_id, outcome="refused"
        ),
    }

    async def visible(k: Key, **params: Any) -> set[uuid.UUID]:
        return {uuid.UUID(i) for i in _ids(await _list(client, k, limit=100, **params))}

    def named(*names: str) -> set[uuid.UUID]:
        return {rows[n] for n in names}

    assert await visible(alice_key) == named("alice", "alice_own")
    assert await visible(alice_key, namespace="bob") == set()
    # Rows without a recorded project may hold ids of any project: not shown.
    assert await visible(p1_key) == named("bob_p1")
    assert await visible(key) == named(*rows)
    hidden = await client.get(f"/v1/audit/{rows['bob_p2']}", headers=alice_key.headers)
    assert hidden.status_code == 404


async def test_one_call_whole(client: httpx.AsyncClient, key: Key, seed: Seed) -> None:
    returned = [uuid.uuid4(), uuid.uuid4()]
    request = {"goal": "fix the refresh token bug", "namespace": "alice:s1", "limit": 24}
    details = {
        "items": [
            {"id": str(returned[0]), "score": 0.71, "facet": "gotchas", "reason": "semantic 0.71"},
            {"id": str(returned[1]), "score": 0.42, "facet": "decisions", "reason": "terms"},
        ],
        "gated_out": 3,
        "markdown_tokens": 812,
    }
    audit_id = await seed(
        key.org_id,
        action="context",
        namespace="alice:s1",
        key_id=key.key_id,
        request=request,
        details=details,
        memory_ids=returned,
        latency_ms=7.25,
    )
    response = await client.get(f"/v1/audit/{audit_id}", headers=key.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["request"] == request
    assert body["details"] == details
    assert body["memory_ids"] == [str(i) for i in returned]
    assert body["latency_ms"] == 7.25
    assert (body["action"], body["namespace"], body["key_id"]) == (
        "context",
        "alice:s1",
        str(key.key_id),
    )

    summary = (await _list(client, key))["items"][0]
    assert "request" not in summary
    assert "details" not in summary
    full = (await _list(client, key, full="true"))["items"][0]
    assert full["details"] == details

    missing = await client.get(f"/v1/audit/{uuid.uuid4()}", headers=key.headers)
    assert missing.status_code == 404
    bad = await client.get("/v1/audit/not-a-uuid", headers=key.headers)
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "audit_id"


async def test_reading_the_trail_is_not_itself_audited(
    client: httpx.AsyncClient, key: Key, seed: Seed
) -> None:
    audit_id = await seed(key.org_id)
    await _list(client, key)
    await client.get(f"/v1/audit/{audit_id}", headers=key.headers)
    assert (await _list(client, key))["total"] == 1
