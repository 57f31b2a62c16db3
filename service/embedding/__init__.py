"""Embedders: the interface, and the implementations chosen by ``CTXPACK_EMBEDDER``."""

from __future__ import annotations

from service.config import Settings
from service.embedding.base import AsyncEmbedder, Embedder
from service.errors import ServiceUnavailable


def build_embedder(settings: Settings) -> Embedder:
    """The embedder the settings ask for, checked against the column width."""
    embedder: Embedder
    if settings.embedder == "fake":
        from service.embedding.fake import FakeEmbedder

        embedder = FakeEmbedder(settings.embedding_dims)
    elif settings.embedder == "openai":
        from service.embedding.remote import RemoteEmbedder

        if not settings.embedder_url:
            raise ServiceUnavailable("CTXPACK_EMBEDDER=openai needs CTXPACK_EMBEDDER_URL")
        embedder = RemoteEmbedder(settings.embedder_url, settings.embedder_model, settings.embedding_dims)
    elif settings.embedder == "minilm-torch":
        from service.embedding.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder(threads=settings.embed_threads, batch_size=settings.embed_batch_size)
    else:
        from service.embedding.onnx import OnnxMiniLMEmbedder

        cache = settings.model_cache_dir or settings.data_dir / "models"
        embedder = OnnxMiniLMEmbedder(
            cache,
            threads=settings.embed_threads,
            batch_size=settings.embed_batch_size,
            documents_precision=settings.embed_documents_precision,
            query_precision=settings.query_precision,
        )
    if embedder.dims != settings.embedding_dims:
        raise ServiceUnavailable(
            f"embedder {embedder.name} returns {embedder.dims} dims; the column holds "
            f"{settings.embedding_dims}"
        )
    return embedder


__all__ = ["AsyncEmbedder", "Embedder", "build_embedder"]
