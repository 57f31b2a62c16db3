"""Hostile input: SQL and full-text-search metacharacters, unicode, NUL bytes, lone
surrogates, deeply nested JSON and namespace tricks get a clean 2xx or 4xx, never a 5xx, and
text is stored exactly as sent (after redaction)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import Key, KeyFactory, McpConnect, SqlRows

BASE = "The ingest worker retries failed uploads three times before paging the on-call."

METACHARACTERS = [
    "'; DROP TABLE memories; --",
    "a & | ! :* ( ) <-> <2> 'quoted' \"double\"",
    "back\\slash \\\\ \\' \\x00 \\u0000 \\n",
    "%_% LIKE wildcards and [brackets] {braces} $1 $$dollar$$ ?",
    "to_tsquery('a & !b') AND 1=1 OR ''=''",
    ":* & !!! ||| ((( ))) <->",
]

UNICODE = [
    "Ünïcödé façade, naïve café, Straße, ﬁ ligature, Ⅻ numeral",
    "日本語のメモ: デプロイは金曜日に凍結される。",
    "RTL: עברית ومرحبا بالعالم and emoji 🚀🔥👩🏽‍💻 with ZWJ",
    "zero\u200bwidth\u200djoiner\ufeffBOM and combining e\u0301 and \u202eRLO",
    "Math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and astral 𐍈 and \U0001f600",
]


def _ok_or_4xx(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    assert "error" in response.json() or response.status_code < 300


@pytest.mark.parametrize("text", METACHARACTERS + UNICODE)
async def test_metacharacters_and_unicode_round_trip(
    client: httpx.AsyncClient, key: Key, text: str
) -> None:
    content = f"{BASE} Note: {text}"
    stored = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "content": content, "name": text[:80], "tags": [text[:64]]},
        headers=key.headers,
    )
    assert stored.status_code == 201, stored.text
    got = await client.get(f"/v1/memories/{stored.json()['id']}", headers=key.headers)
    assert got.json()["content"] == content
    assert got.json()["tags"] == [text[:64]]
    # As filters: matched literally, never as patterns or SQL.
    for params in (
        {"tag": text[:64]},
        {"tag": "%"},
        {"agent_id": text[:128]},
        {"project": text[:128]},
    ):
        listed = await client.get("/v1/memories", params=params, headers=key.headers)
        _ok_or_4xx(listed)
    exact = await client.get("/v1/memories", params={"tag": text[:64]}, headers=key.headers)
    assert [i["id"] for i in exact.json()["items"]] == [stored.json()["id"]]
    wildcard = await client.get("/v1/memories", params={"tag": "%"}, headers=key.headers)
    assert wildcard.json()["items"] == []


async def test_metacharacters_in_context_goal(
    client: httpx.AsyncClient, key: Key, app: Any
) -> None:
    if "/v1/context" not in app.openapi()["paths"]:
        return  # not built yet
    await client.post(
        "/v1/remember", json={"namespace": "alice", "content": BASE}, headers=key.headers
    )
    for goal in [*METACHARACTERS, *UNICODE, "&", "!", ":*", "''", "\\", " ", "a" * 5000]:
        response = await client.post(
            "/v1/context", json={"goal": goal, "namespace": "alice"}, headers=key.headers
        )
        _ok_or_4xx(response)
    nul = await client.post(
        "/v1/context", json={"goal": "deploy\x00", "namespace": "alice"}, headers=key.headers
    )
    assert nul.status_code == 422, nul.text


# --- NUL bytes and lone surrogates: Postgres text refuses both ---------------------------------

NUL_BODIES: list[tuple[str, dict[str, Any]]] = [
    ("content", {"content": f"{BASE}\x00"}),
    ("name", {"name": "a\x00b"}),
    ("tags", {"tags": ["a\x00"]}),
    ("domain", {"domain": "ops\x00"}),
    ("source", {"source": "slack\x00"}),
    ("origin", {"origin": "agent\x00"}),
    ("url", {"url": "https://example.com/\x00"}),
    ("metadata", {"metadata": {"note": "a\x00b"}}),
    ("metadata", {"metadata": {"k\x00": "v"}}),
    ("metadata", {"metadata": {"deep": [{"x": "\x00"}]}}),
    ("namespace", {"namespace": "alice\x00"}),
    ("project", {"project": "p\x00"}),
    ("agent_id", {"agent_id": "a\x00"}),
]


@pytest.mark.parametrize(
    ("field", "extra"), NUL_BODIES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(NUL_BODIES)]
)
async def test_nul_bytes_are_a_clean_422(
    client: httpx.AsyncClient, key: Key, sql: SqlRows, field: str, extra: dict[str, Any]
) -> None:
    body = {"namespace": "alice", "content": BASE, **extra}
    response = await client.post("/v1/remember", json=body, headers=key.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"].startswith(field), response.text
    batch = await client.post("/v1/remember/batch", json={"items": [body]}, headers=key.headers)
    assert batch.status_code == 422, batch.text
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []


async def test_nul_bytes_in_patch_and_filters(client: httpx.AsyncClient, key: Key) -> None:
    stored = await client.post(
        "/v1/remember", json={"namespace": "alice", "content": BASE}, headers=key.headers
    )
    memory = f"/v1/memories/{stored.json()['id']}"
    for patch in (
        {"content": BASE + "\x00"},
        {"name": "\x00"},
        {"tags": ["\x00"]},
        {"domain": "\x00"},
        {"source": "\x00"},
        {"url": "\x00"},
        {"metadata": {"a": "\x00"}},
    ):
        response = await client.patch(memory, json=patch, headers=key.headers)
        assert response.status_code == 422, (patch, response.text)
    for params in (
        {"tag": "\x00"},
        {"agent_id": "a\x00"},
        {"project": "\x00"},
        {"namespace": "\x00"},
    ):
        response = await client.get("/v1/memories", params=params, headers=key.headers)
        assert response.status_code in (200, 422), (params, response.text)
    assert (await client.get(memory, headers=key.headers)).json()["content"] == BASE


@pytest.mark.parametrize(
    "raw",
    [
        b'{"namespace": "alice", "content": "' + BASE.encode() + b' \\ud800 lone"}',
        b'{"namespace": "alice", "content": "' + BASE.encode() + b'", "name": "\\udfff"}',
        b'{"namespace": "alice", "content": "' + BASE.encode() + b'", "metadata": {"\\ud83d": 1}}',
    ],
)
async def test_lone_surrogates_are_a_clean_422(
    client: httpx.AsyncClient, key: Key, raw: bytes
) -> None:
    response = await client.post(
        "/v1/remember", content=raw, headers={**key.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text


async def test_invalid_utf8_and_broken_json_are_4xx(client: httpx.AsyncClient, key: Key) -> None:
    for raw in (
        b"\xff\xfe{}",
        b'{"namespace": "alice", "content": "\xc3\x28"}',
        b"{",
        b"[]",
        b"null",
    ):
        response = await client.post(
            "/v1/remember", content=raw, headers={**key.headers, "Content-Type": "application/json"}
        )
        assert 400 <= response.status_code < 500, (raw, response.text)


# --- nesting -------------------------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


def nested_json(depth: int) -> str:
    """``nested(depth)`` as JSON text, built without recursion."""
    opens = ['{"k": ' if i % 2 else "[" for i in reversed(range(depth))]
    closes = ["}" if i % 2 else "]" for i in range(depth)]
    return "".join(opens) + '"leaf"' + "".join(closes)


@pytest.mark.parametrize("depth", [9, 50, 1000])
async def test_deeply_nested_metadata_is_422(
    client: httpx.AsyncClient, key: Key, sql: SqlRows, depth: int
) -> None:
    body = (
        '{"namespace": "alice", "content": '
        + json.dumps(BASE)
        + ', "metadata": {"x": '
        + nested_json(depth)
        + "}}"
    )
    response = await client.post(
        "/v1/remember", content=body, headers={**key.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text[:500]
    assert response.json()["error"]["field"].startswith("metadata")
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []


async def test_pathologically_nested_json_is_4xx(client: httpx.AsyncClient, key: Key) -> None:
    depth = 200_000  # past Python's recursion limit when parsed
    raw = (
        b'{"namespace": "alice", "content": "x", "metadata": {"x": '
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )
    response = await client.post(
        "/v1/remember", content=raw, headers={**key.headers, "Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text[:500]


async def test_metadata_at_the_depth_limit_is_kept(client: httpx.AsyncClient, key: Key) -> None:
    response = await client.post(
        "/v1/remember",
        json={"namespace": "alice", "content": BASE, "metadata": {"x": nested(7)}},
        headers=key.headers,
    )
    assert response.status_code == 201, response.text


# --- namespace tricks ----------------------------------------------------------------------------

BAD_NAMESPACES = [
    "u:s:t:x",
    "u::t",
    "*",
    "u:*",
    "%",
    "u%",
    ":u",
    "u:",
    ":",
    "",
    " u",
    "u s",
    "u/s",
    "u\\s",
    "a" * 65,
    "ü",
    "u:s:t:",
    "u\n",
]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES)
async def test_bad_namespaces_are_422_everywhere(
    client: httpx.AsyncClient, make_key: KeyFactory, namespace: str
) -> None:
    key = await make_key()
    remember = await client.post(
        "/v1/remember", json={"namespace": namespace, "content": BASE}, headers=key.headers
    )
    assert remember.status_code == 422, remember.text
    assert remember.json()["error"]["field"] == "namespace"
    if namespace not in ("*", "u:*"):  # list filters: `*` and `u:*` mean everything / the subtree
        listed = await client.get(
            "/v1/memories", params={"namespace": namespace}, headers=key.headers
        )
        assert listed.status_code == 422, listed.text


async def test_wildcard_like_segments_are_literal(
    client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    """``_`` and ``.`` are legal segment characters; they must never act as patterns."""
    admin = await make_key()
    ids = {}
    for namespace in ("_", "a_b", "a-b", "axb", "a.b", "_:s1", "a_b:s_"):
        response = await client.post(
            "/v1/remember",
            json={"namespace": namespace, "content": f"{BASE} ({namespace})"},
            headers=admin.headers,
        )
        assert response.status_code == 201, response.text
        ids[namespace] = response.json()["id"]

    async def listed(key: Key, namespace: str | None = None) -> set[str]:
        params = {"namespace": namespace} if namespace else {}
        response = await client.get("/v1/memories", params=params, headers=key.headers)
        assert response.status_code == 200, response.text
        return {i["namespace"] for i in response.json()["items"]}

    assert await listed(admin, "a_b") == {"a_b"}
    assert await listed(admin, "_") == {"_"}
    assert await listed(admin, "_:*") == {"_", "_:s1"}
    assert await listed(admin, "a_b:*") == {"a_b", "a_b:s_"}
    limited = await make_key(org=admin.org, namespaces=["a_b"])
    assert await listed(limited) == {"a_b", "a_b:s_"}
    underscore = await make_key(org=admin.org, namespaces=["_"])
    assert await listed(underscore) == {"_", "_:s1"}
    for namespace, memory_id in ids.items():
        got = await client.get(f"/v1/memories/{memory_id}", headers=limited.headers)
        assert got.status_code == (200 if namespace.startswith("a_b") else 404)


async def test_bad_ids_and_paging_are_422(client: httpx.AsyncClient, key: Key) -> None:
    for path in (
        "/v1/memories/not-a-uuid",
        "/v1/memories/'; DROP TABLE memories; --",
        "/v1/memories/%00",
    ):
        assert (await client.get(path, headers=key.headers)).status_code in (404, 422)
    for params in (
        {"limit": 0},
        {"limit": 10_000},
        {"offset": -1},
        {"offset": "1e9"},
        {"type": "nope"},
    ):
        response = await client.get("/v1/memories", params=params, headers=key.headers)
        assert response.status_code == 422, (params, response.text)


# --- the same over MCP, where no HTTP guard stands in front (stdio) ----------------------------


@pytest.mark.parametrize(
    ("field", "extra"), NUL_BODIES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(NUL_BODIES)]
)
async def test_nul_bytes_over_mcp_are_a_validation_error(
    mcp_connect: McpConnect, key: Key, sql: SqlRows, field: str, extra: dict[str, Any]
) -> None:
    async with mcp_connect(key) as mcp:
        result = await mcp.call_tool("remember", {"namespace": "alice", "content": BASE, **extra})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "validation_error", error
    assert error["field"].startswith(field), error
    assert await sql("SELECT 1 FROM memories WHERE org_id = :o", o=key.org_id) == []
