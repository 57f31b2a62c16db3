"""embedding/remote.py: an OpenAI-compatible embedding server. One request per batch to
``{url}/v1/embeddings`` naming the model; the answer's rows put back in input order and
normalised (the store ranks by cosine on unit vectors); a failed answer raises."""

from __future__ import annotations

import json

import httpx
import pytest

from service.embedding.remote import RemoteEmbedder


def serving(answer: httpx.Response, seen: list[httpx.Request]) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    return httpx.Client(transport=httpx.MockTransport(handle))


def test_a_batch_is_one_request_and_rows_come_back_in_order_normalised() -> None:
    seen: list[httpx.Request] = []
    embedder = RemoteEmbedder("http://tei.local/", "all-MiniLM-L6-v2", dims=2)
    data = {"data": [{"index": 1, "embedding": [0, 2]}, {"index": 0, "embedding": [3, 4]}]}
    embedder._client = serving(httpx.Response(200, json=data), seen)
    assert embedder.embed_documents(["a", "b"]) == [[0.6, 0.8], [0.0, 1.0]]
    (request,) = seen
    assert str(request.url) == "http://tei.local/v1/embeddings"
    assert json.loads(request.content) == {"model": "all-MiniLM-L6-v2", "input": ["a", "b"]}
    assert embedder.name == "openai:all-MiniLM-L6-v2" and embedder.dims == 2


def test_a_zero_vector_stays_zero_and_a_failure_raises() -> None:
    embedder = RemoteEmbedder("http://tei.local", "m", dims=2)
    embedder._client = serving(httpx.Response(200, json={"data": [{"index": 0, "embedding": [0, 0]}]}), [])
    assert embedder.embed_query("q") == [0.0, 0.0]
    embedder._client = serving(httpx.Response(503, text="loading"), [])
    with pytest.raises(httpx.HTTPStatusError):
        embedder.embed_query("q")
