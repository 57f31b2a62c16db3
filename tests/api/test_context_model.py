"""Context packs end to end with the real all-MiniLM-L6-v2 model: the calibrated relevance
floor keeps the obviously relevant memory and gates out the unrelated ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from service.app import create_app
from service.embedding.minilm import MiniLMEmbedder
from tests.conftest import KeyFactory, make_settings

pytestmark = pytest.mark.model

MEMORIES = [
    (
        "decision",
        "We rotate refresh tokens on every use and revoke the whole token family on reuse.",
    ),
    (
        "gotcha",
        "The auth service's session cookie must be SameSite=Lax or the OAuth callback loses it.",
    ),
    ("episode", "Grandma's sourdough needs a rye starter fed twice a day before baking."),
    (
        "procedure",
        "To rebuild the docs site run make docs and upload the html folder to the bucket.",
    ),
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(threads=2)


@pytest.fixture
async def model_client(pg_url: str, minilm: MiniLMEmbedder) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(
        make_settings(pg_url, embedder="minilm"), embedder=minilm, database_url=pg_url
    )
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def test_real_model_finds_the_relevant_and_gates_the_rest(
    model_client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    key = await make_key()
    ids = {}
    for memory_type, content in MEMORIES:
        response = await model_client.post(
            "/v1/remember",
            json={"namespace": "alice", "type": memory_type, "content": content},
            headers=key.headers,
        )
        assert response.status_code == 201, response.text
        ids[memory_type] = response.json()["id"]

    response = await model_client.post(
        "/v1/context",
        json={"goal": "Add refresh-token rotation to the auth service", "namespace": "alice:s1"},
        headers=key.headers,
    )
    assert response.status_code == 200, response.text
    pack = response.json()
    got = [i for s in pack["sections"] for i in s["items"]]
    assert (
        got[0]["id"] == ids["decision"] or pack["sections"][0]["items"][0]["id"] == ids["decision"]
    )
    top = next(i for i in got if i["id"] == ids["decision"])
    assert "semantic" in top["reason"]
    assert "'refresh-token rotation'" in top["reason"]
    assert ids["episode"] not in {i["id"] for i in got}
    assert ids["procedure"] not in {i["id"] for i in got}
    assert pack["gated_out"] >= 2
    # The real tokenizer counts the markdown.
    assert 0 < pack["markdown_tokens"] <= 4000

    unrelated = await model_client.post(
        "/v1/context",
        json={"goal": "Configure Kubernetes ingress TLS certificates", "namespace": "alice"},
        headers=key.headers,
    )
    assert unrelated.json()["total_items"] == 0
    assert unrelated.json()["gated_out"] >= 1
    assert "Nothing relevant" in unrelated.json()["usage_hint"]


ISSUE_14 = [
    ("acme:auth:t1", "task", "Migrate token signing from HS256 to RS256; the mobile API is next."),
    ("acme:auth", "decision", "We sign access tokens with RS256 so services verify them offline."),
    ("acme:auth", "decision", "Refresh tokens are rotated on every use and the old one revoked."),
    ("acme:auth", "constraint", "Never log raw access or refresh tokens, not even truncated."),
    ("acme:auth", "gotcha", "Token validation fails with clock skew above 30 seconds on staging."),
    ("acme:auth", "gotcha", "The mobile client caches the JWKS for a day after a key rotation."),
    ("acme:auth", "verification", "The RS256 signing tests pass on the gateway and billing."),
    ("acme", "gotcha", "pytest session-scoped fixtures leak database state between modules."),
    ("acme", "episode", "The user prefers short answers, code first, no preamble."),
]


async def test_wake_with_the_real_model_wakes_the_agent(
    model_client: httpx.AsyncClient, make_key: KeyFactory
) -> None:
    """Issue 14 with MiniLM: generic goals give the working set, a shared word ("session")
    pulls nothing forward, a specific goal pulls its matches to the front."""
    key = await make_key()
    for namespace, memory_type, content in ISSUE_14:
        response = await model_client.post(
            "/v1/remember",
            json={"namespace": namespace, "type": memory_type, "content": content},
            headers=key.headers,
        )
        assert response.status_code == 201, response.text

    async def wake(**body: str) -> dict[str, Any]:
        response = await model_client.post(
            "/v1/context", json={"layer": "wake", **body}, headers=key.headers
        )
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    resume = await wake(namespace="acme:auth:t1", goal="resume work")
    types = [i["type"] for s in resume["sections"] for i in s["items"]]
    assert resume["total_items"] == 8
    assert types[0] == "task"
    assert {"decision", "constraint", "gotcha", "episode"} <= set(types)

    start = await wake(namespace="acme:auth", goal="start of session")
    items = [i for s in start["sections"] for i in s["items"]]
    assert start["total_items"] == 8
    assert not any("pulled forward" in i["reason"] for i in items)
    gotchas = next(s for s in start["sections"] if s["facet"] == "gotchas")["items"]
    # The session's gotchas before the user-level pytest one: no goal pull, closeness decides.
    assert [g["namespace"] for g in gotchas] == ["acme:auth", "acme:auth", "acme"]

    specific = await wake(namespace="acme:auth:t1", goal="resume the RS256 migration")
    decisions = next(s for s in specific["sections"] if s["facet"] == "decisions")["items"]
    assert "RS256" in decisions[0]["content"]
    assert "pulled forward by the goal" in decisions[0]["reason"]
