"""The Embedder interface and the helpers that run it off the event loop."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import anyio
import anyio.to_thread
import numpy as np

from service.cache import TtlLru


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors. Implementations are synchronous and thread-safe
    enough to be called from one worker thread at a time; ``AsyncEmbedder`` runs them off the
    event loop."""

    name: str

    @property
    def dims(self) -> int:
        """Width of the vectors this embedder returns."""
        ...

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts to be stored. One call is one batch."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes for the model's tokenizer (used by token budgets)."""
        ...


class AsyncEmbedder:
    """Runs an ``Embedder`` in worker threads with bounded concurrency, so encoding never
    blocks the event loop and two requests never oversubscribe the CPU."""

    def __init__(self, embedder: Embedder, concurrency: int = 1, query_cache: int = 0) -> None:
        self.sync = embedder
        # Goals repeat (every session start asks its wake pack with the same goal; an agent
        # re-asks as it works): their vectors are kept, the most recent ``query_cache``.
        self._queries: TtlLru[str, list[float]] = TtlLru(
            float("inf") if query_cache > 0 else 0.0, max(query_cache, 1)
        )
        self._limiter = anyio.CapacityLimiter(max(1, concurrency))
        # Queries get a lane of their own: a context call must not wait behind a 500-item
        # batch write holding the document lane (both run the same thread-safe model).
        # Only for embedders that declare concurrent calls safe (sentence-transformers'
        # tokenizer is mutated per call and is not).
        if getattr(embedder, "thread_safe", False):
            self._query_limiter = anyio.CapacityLimiter(max(1, concurrency))
        else:
            self._query_limiter = self._limiter

    @property
    def dims(self) -> int:
        return self.sync.dims

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await anyio.to_thread.run_sync(
            self.sync.embed_documents, texts, limiter=self._limiter
        )

    async def embed_matrix(self, texts: list[str]) -> np.ndarray:
        """``embed_documents`` as one float32 matrix, a row per text, made in the worker
        thread: from the embedder's own ``embed_matrix`` where it has one (the model's
        output as it is), else from its lists. A batch write's vectors go to the database as
        one matrix (store/vectors.py:VectorBatch); as lists, 500 of them cost 8-13 ms of
        conversion each way."""
        if not texts:
            return np.empty((0, self.dims), dtype=np.float32)
        return await anyio.to_thread.run_sync(self._matrix, texts, limiter=self._limiter)

    def _matrix(self, texts: list[str]) -> np.ndarray:
        own = getattr(self.sync, "embed_matrix", None)
        if own is not None:
            return np.asarray(own(texts), dtype=np.float32)
        return np.asarray(self.sync.embed_documents(texts), dtype=np.float32)

    async def embed_query(self, text: str) -> list[float]:
        cached = self._queries.get(text)
        if cached is not None:
            return cached
        vector = await anyio.to_thread.run_sync(
            self.sync.embed_query, text, limiter=self._query_limiter
        )
        self._queries.put(text, vector)
        return vector

    def count_tokens(self, text: str) -> int:
        return self.sync.count_tokens(text)
