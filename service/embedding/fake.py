"""A deterministic embedder for tests: no model, same text gives the same vector, and texts
sharing words point in similar directions (a hashed bag of words and character trigrams)."""

from __future__ import annotations

import hashlib
import math
import re

_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder:
    name = "fake"
    # Sessions, tokenizers and clients here take concurrent calls.
    thread_safe = True

    def __init__(self, dims: int = 384) -> None:
        self._dims = dims

    @property
    def dims(self) -> int:
        return self._dims

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        grams = [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
        return words + words + grams

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self._dims
        for feature in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self._dims
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0:
            vec[0] = 1.0
            return vec
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def count_tokens(self, text: str) -> int:
        # Roughly what a WordPiece tokenizer gives on English: words plus punctuation.
        return len(re.findall(r"\w+|[^\w\s]", text)) + 2
