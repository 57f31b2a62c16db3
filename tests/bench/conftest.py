"""What the benchmark package's tests share: an embedder that records what it was given."""

from __future__ import annotations

from service.embedding.fake import FakeEmbedder


class Recording(FakeEmbedder):
    """The fake embedder, keeping each ``embed_documents`` call's texts."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed_documents(texts)
