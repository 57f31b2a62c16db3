"""The bf16 document lane: sentence-transformers' vectors from bf16 weights, used only for
batches, only where the CPU has avx512_bf16, and only when the setting allows it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from service.config import Settings
from service.embedding import build_embedder, onnx
from service.embedding.bf16 import Bf16DocumentLane, cpu_has_bf16
from service.embedding.minilm import MiniLMEmbedder
from service.embedding.onnx import BF16_MIN_BATCH, OnnxMiniLMEmbedder
from tests.embedding.test_onnx import LOCOMO, TEXTS

pytestmark = pytest.mark.model

needs_bf16 = pytest.mark.skipif(not cpu_has_bf16(), reason="CPU without avx512_bf16")


def _texts() -> list[str]:
    import json

    texts = list(TEXTS)
    if LOCOMO.exists():
        with LOCOMO.open() as fh:
            for _, line in zip(range(150), fh, strict=False):
                row = json.loads(line)
                texts.append(f"{row.get('speaker', '')}: {row['text']}")
    return texts


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def bf16_embedder(cache_dir: Path) -> OnnxMiniLMEmbedder:
    if not cpu_has_bf16():
        pytest.skip("CPU without avx512_bf16")
    embedder = OnnxMiniLMEmbedder(cache_dir, documents_precision="bf16")
    assert embedder.document_lane() is not None
    return embedder


class _Spy:
    """Counts calls of the bf16 lane's encode."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = Bf16DocumentLane.encode

        def encode(lane: Bf16DocumentLane, texts: list[str]) -> object:
            self.calls += 1
            return original(lane, texts)

        monkeypatch.setattr(Bf16DocumentLane, "encode", encode)


@needs_bf16
def test_bf16_documents_match_sentence_transformers(
    bf16_embedder: OnnxMiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(monkeypatch)
    texts = _texts()
    reference = MiniLMEmbedder(threads=1).embed_documents(texts)
    vectors = bf16_embedder.embed_documents(texts)
    assert spy.calls == 1
    cosines = [_cos(a, b) for a, b in zip(vectors, reference, strict=True)]
    assert min(cosines) >= 0.999
    assert all(abs(_cos(v, v) - 1.0) < 1e-5 for v in vectors)
    # Queries and calls below the cutoff stay on the fp32 ONNX session.
    assert _cos(bf16_embedder.embed_query(TEXTS[3]), reference[3]) > 0.9999
    few = bf16_embedder.embed_documents(texts[: BF16_MIN_BATCH - 1])
    assert spy.calls == 1
    assert min(_cos(a, b) for a, b in zip(few, reference, strict=False)) > 0.9999


@needs_bf16
def test_bf16_lane_is_thread_safe(bf16_embedder: OnnxMiniLMEmbedder) -> None:
    texts = _texts()[:40]
    docs = bf16_embedder.embed_documents(texts)
    query = bf16_embedder.embed_query(texts[0])
    with ThreadPoolExecutor(4) as pool:
        batches = [pool.submit(bf16_embedder.embed_documents, texts) for _ in range(3)]
        queries = [pool.submit(bf16_embedder.embed_query, texts[0]) for _ in range(3)]
        for fut in batches:
            assert min(_cos(a, b) for a, b in zip(fut.result(), docs, strict=True)) > 0.99999
        for fut in queries:
            assert _cos(fut.result(), query) > 0.99999


def test_setting_is_honoured(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(onnx, "cpu_has_bf16", lambda: True)
    monkeypatch.setenv("CTXPACK_EMBED_DOCUMENTS_PRECISION", "fp32")
    settings = Settings(data_dir=tmp_path, model_cache_dir=cache_dir, embedder="minilm")
    assert settings.embed_documents_precision == "fp32"
    embedder = build_embedder(settings)
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    assert embedder.documents_precision == "fp32"
    assert embedder.document_lane() is None
    for value in ("auto", "bf16"):
        embedder = build_embedder(settings.model_copy(update={"embed_documents_precision": value}))
        assert isinstance(embedder, OnnxMiniLMEmbedder)
        assert embedder.documents_precision == "bf16"
    assert Settings().embed_documents_precision == "fp32"  # from the environment
    monkeypatch.delenv("CTXPACK_EMBED_DOCUMENTS_PRECISION")
    assert Settings().embed_documents_precision == "auto"


def test_fp32_where_the_cpu_has_no_bf16(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "cpu_has_bf16", lambda: False)
    loads: list[int] = []
    monkeypatch.setattr(Bf16DocumentLane, "__init__", lambda *a, **k: loads.append(1))
    for value in ("auto", "bf16"):
        embedder = OnnxMiniLMEmbedder(cache_dir, documents_precision=value)
        assert embedder.documents_precision == "fp32"
        assert embedder.document_lane() is None
        texts = _texts()[:16]
        assert embedder.embed_documents(texts) == embedder._encode(texts)
    assert loads == []
    with pytest.raises(ValueError, match="embed_documents_precision"):
        OnnxMiniLMEmbedder(cache_dir, documents_precision="int8")


def test_batches_do_not_wait_for_the_lane_to_load(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(onnx, "cpu_has_bf16", lambda: True)
    release = threading.Event()

    def slow_load(self: Bf16DocumentLane, *args: object, **kwargs: object) -> None:
        release.wait(10)
        raise RuntimeError("no bf16 today")

    monkeypatch.setattr(Bf16DocumentLane, "__init__", slow_load)
    embedder = OnnxMiniLMEmbedder(cache_dir, documents_precision="bf16")
    texts = _texts()[:8]
    # Loading: the batch is encoded in fp32 meanwhile.
    assert embedder.embed_documents(texts) == embedder._encode(texts)
    release.set()
    # The load failed: documents stay on fp32.
    assert embedder.document_lane(wait=True) is None
    assert embedder.embed_documents(texts) == embedder._encode(texts)
