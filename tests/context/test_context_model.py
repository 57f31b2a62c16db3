"""Context packs end to end with the real all-MiniLM-L6-v2 model: the calibrated relevance
floor keeps the obviously relevant memory and gates out the unrelated ones."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
