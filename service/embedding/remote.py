"""An OpenAI-compatible embedding server (``POST {url}/v1/embeddings``), for deployments that
run the model elsewhere (text-embeddings-inference, vLLM, Ollama, LM Studio...)."""

from __future__ import annotations

import math

import httpx

from service.embedding.minilm import count_tokens


class RemoteEmbedder:
    name = "openai"
    # Sessions, tokenizers and clients here take concurrent calls.
    thread_safe = True

    def __init__(self, base_url: str, model: str, dims: int, timeout: float = 30.0) -> None:
        self._url = base_url.rstrip("/") + "/v1/embeddings"
        self._model = model
        self._dims = dims
        self._client = httpx.Client(timeout=timeout)
        self.name = f"openai:{model}"

    @property
    def dims(self) -> int:
        return self._dims

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        response = self._client.post(self._url, json={"model": self._model, "input": texts})
        response.raise_for_status()
        rows = sorted(response.json()["data"], key=lambda r: r["index"])
        out = []
        for row in rows:
            vec = [float(x) for x in row["embedding"]]
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec])
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
