"""The default embedder (MiniLM on onnxruntime) gives sentence-transformers' vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.config import Settings
from service.embedding import build_embedder
from service.embedding.minilm import MiniLMEmbedder
from service.embedding.onnx import OnnxMiniLMEmbedder

pytestmark = pytest.mark.model

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "bench" / "locomo" / "memories.jsonl"
TEXTS = [
    "Refresh tokens are rotated on every use.",
    "The staging database is reset every Sunday at 02:00 UTC.",
    "ok",
    "A much longer sentence about the build system, the cache keys that include the lockfile "
    "hash, and why the CI runners must not share a TMPDIR on tmpfs with the test suite.",
]


@pytest.fixture(scope="module")
def onnx_embedder(tmp_path_factory: pytest.TempPathFactory) -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(tmp_path_factory.mktemp("models"))


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_onnx_matches_sentence_transformers(onnx_embedder: OnnxMiniLMEmbedder) -> None:
    texts = list(TEXTS)
    if LOCOMO.exists():
        with LOCOMO.open() as fh:
            texts += [json.loads(line)["text"] for _, line in zip(range(150), fh, strict=False)]
    reference = MiniLMEmbedder(threads=1).embed_documents(texts)
    # Batched (padded to the longest text of a batch) and one by one.
    batched = onnx_embedder.embed_documents(texts)
    assert min(_cos(a, b) for a, b in zip(batched, reference, strict=True)) > 0.9999
    single = onnx_embedder.embed_query(TEXTS[3])
    assert _cos(single, reference[3]) > 0.9999
    assert len(single) == 384 == onnx_embedder.dims


async def test_a_batch_s_matrix_is_its_documents_vectors(
    onnx_embedder: OnnxMiniLMEmbedder,
) -> None:
    """``embed_matrix`` (what a batch write binds) is ``embed_documents`` as one float32
    matrix, row for row, through ``AsyncEmbedder`` too; an embedder without one (the fake)
    gets its lists read into a matrix; no texts, no rows."""
    import numpy as np

    from service.embedding import AsyncEmbedder
    from service.embedding.fake import FakeEmbedder

    matrix = onnx_embedder.embed_matrix(list(TEXTS))
    assert matrix.dtype == np.float32 and matrix.shape == (len(TEXTS), 384)
    assert np.array_equal(
        matrix, np.asarray(onnx_embedder.embed_documents(list(TEXTS)), np.float32)
    )
    through = await AsyncEmbedder(onnx_embedder).embed_matrix(list(TEXTS))
    assert np.array_equal(through, matrix)
    fake = FakeEmbedder()
    lists = await AsyncEmbedder(fake).embed_matrix(list(TEXTS))
    assert np.array_equal(lists, np.asarray(fake.embed_documents(list(TEXTS)), np.float32))
    assert (await AsyncEmbedder(fake).embed_matrix([])).shape == (0, 384)


def test_default_embedder_is_onnx_and_cached(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, embedder="minilm")
    first = build_embedder(settings)
    assert isinstance(first, OnnxMiniLMEmbedder)
    assert (tmp_path / "models" / "all-MiniLM-L6-v2.onnx").exists()
    # The second start loads the cached graph.
    second = build_embedder(settings)
    assert _cos(first.embed_query("cache hit"), second.embed_query("cache hit")) > 0.99999


async def test_queries_do_not_wait_behind_a_batch(onnx_embedder: OnnxMiniLMEmbedder) -> None:
    import time

    import anyio

    from service.embedding import AsyncEmbedder

    embedder = AsyncEmbedder(onnx_embedder, concurrency=1)
    texts = [f"{TEXTS[3]} variant {i}" for i in range(400)]
    done: dict[str, float] = {}

    async def batch() -> None:
        await embedder.embed_documents(texts)
        done["batch"] = time.perf_counter()

    async def query() -> None:
        await anyio.sleep(0.05)  # the batch holds the document lane by now
        await embedder.embed_query("refresh token rotation")
        done["query"] = time.perf_counter()

    async with anyio.create_task_group() as tg:
        tg.start_soon(batch)
        tg.start_soon(query)
    assert done["query"] < done["batch"]
