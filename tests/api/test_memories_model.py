"""End to end with the real all-MiniLM-L6-v2 model: redaction, gate, embedding, near duplicates."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from service.embedding.minilm import MiniLMEmbedder
from tests.conftest import KeyFactory, make_settings

pytestmark = pytest.mark.model


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(threads=2)


@pytest.fixture
async def model_client(pg_url: str, minilm: MiniLMEmbedder) -> AsyncIterator[httpx.AsyncClient]:
    settings: Settings = make_settings(pg_url, embedder="minilm")
    application = create_app(settings, embedder=minilm, database_url=pg_url)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            c.app = application  # type: ignore[attr-defined]
            yield c


def test_model_is_local_and_normalised(minilm: MiniLMEmbedder) -> None:
    vec = minilm.embed_query("refresh token rotation")
    assert len(vec) == 384 == minilm.dims
    assert abs(sum(x * x for x in vec) - 1.0) < 1e-4
    # WordPiece: refresh, token, rot, ##ation.
    assert minilm.count_tokens("refresh token rotation") == 4


async def test_real_model_near_duplicates(model_client: httpx.AsyncClient, make_key: KeyFactory) -> None:
    # make_key uses the session app's sessionmaker; the orgs are shared by both apps.
    key = await make_key()
    first = await model_client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "decision",
              "content": "We rotate refresh tokens on every use and revoke the whole family on reuse."},
        headers=key.headers,
    )
    assert first.status_code == 201, first.text
    paraphrase = await model_client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "decision",
              "content": "Refresh tokens are rotated on each use; on reuse the entire token family is revoked."},
        headers=key.headers,
    )
    unrelated = await model_client.post(
        "/v1/remember",
        json={"namespace": "alice", "type": "decision",
              "content": "The marketing site is built with Astro and deployed to Netlify."},
        headers=key.headers,
    )
    near = paraphrase.json()["near_duplicates"]
    assert [n["id"] for n in near] == [first.json()["id"]]
    assert near[0]["score"] >= 0.8
    assert unrelated.json()["near_duplicates"] == []
