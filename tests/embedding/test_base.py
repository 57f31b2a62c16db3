"""A repeated goal skips the model; the cache is bounded and can be turned off."""

from __future__ import annotations

from service.embedding import AsyncEmbedder
from service.embedding.fake import FakeEmbedder


class CountingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return super().embed_query(text)


async def test_repeated_goal_is_embedded_once() -> None:
    model = CountingEmbedder()
    embedder = AsyncEmbedder(model, query_cache=2)
    first = await embedder.embed_query("fix the deploy pipeline")
    assert await embedder.embed_query("fix the deploy pipeline") == first
    assert model.queries == ["fix the deploy pipeline"]
    await embedder.embed_query("b")
    await embedder.embed_query("c")  # evicts the least recently used goal
    await embedder.embed_query("fix the deploy pipeline")
    assert model.queries == ["fix the deploy pipeline", "b", "c", "fix the deploy pipeline"]


async def test_cache_off() -> None:
    model = CountingEmbedder()
    embedder = AsyncEmbedder(model, query_cache=0)
    await embedder.embed_query("same")
    await embedder.embed_query("same")
    assert model.queries == ["same", "same"]
