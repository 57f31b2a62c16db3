"""The int8 query lane: built once, locally, beside the fp32 graph; its query vectors stay
close to fp32's; only queries use it; the setting takes fp32 or int8 and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import corpora
from service.config import Settings
from service.embedding import build_embedder, onnx
from service.embedding.int8 import check_query_precision, int8_path, kept_fp32, quantize_onnx
from service.embedding.onnx import OnnxMiniLMEmbedder
from tests.embedding.test_onnx import LOCOMO, TEXTS

QUERIES = LOCOMO.with_name("queries.jsonl")
# Measured over every LoCoMo question and agent-corpus goal (python -m bench.query_lane
# quality): cosine min 0.9944 and 0.9923. A one-word text is the weakest case (0.985 for "ok").
MIN_COSINE = 0.99
MIN_COSINE_ONE_WORD = 0.98


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _goals() -> list[str]:
    """Sentences: the test texts but the one-word one, agent goals and LoCoMo questions."""
    goals = [t for t in TEXTS if " " in t]
    goals += [q["query"] for q in corpora.read("agent")["queries"]]
    if QUERIES.exists():
        with QUERIES.open() as fh:
            goals += [json.loads(line)["query"] for _, line in zip(range(100), fh, strict=False)]
    return goals


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def lanes(cache_dir: Path) -> dict[str, OnnxMiniLMEmbedder]:
    return {p: OnnxMiniLMEmbedder(cache_dir, query_precision=p) for p in ("fp32", "int8")}


@pytest.mark.model
def test_int8_queries_stay_close_to_fp32(lanes: dict[str, OnnxMiniLMEmbedder]) -> None:
    cosines = [
        _cos(lanes["int8"].embed_query(g), lanes["fp32"].embed_query(g)) for g in _goals()
    ]
    assert min(cosines) >= MIN_COSINE
    # Not the same vectors: the int8 graph is what ran.
    assert max(cosines) < 0.99999
    assert _cos(lanes["int8"].embed_query("ok"), lanes["fp32"].embed_query("ok")) >= (
        MIN_COSINE_ONE_WORD
    )
    vector = lanes["int8"].embed_query(TEXTS[0])
    assert len(vector) == 384
    assert abs(_cos(vector, vector) - 1.0) < 1e-5


@pytest.mark.model
def test_documents_stay_on_fp32(lanes: dict[str, OnnxMiniLMEmbedder]) -> None:
    texts = _goals()[:16]
    assert lanes["int8"].embed_documents(texts) == lanes["fp32"].embed_documents(texts)
    assert lanes["int8"].embed_documents(texts[:1]) == lanes["fp32"].embed_documents(texts[:1])


@pytest.mark.model
def test_the_int8_graph_is_built_once_beside_the_fp32_one(
    cache_dir: Path, lanes: dict[str, OnnxMiniLMEmbedder], monkeypatch: pytest.MonkeyPatch
) -> None:
    fp32 = cache_dir / "all-MiniLM-L6-v2.onnx"
    built = int8_path(fp32)
    assert built == cache_dir / "all-MiniLM-L6-v2.int8.onnx"
    assert built.exists()
    assert not list(cache_dir.glob("*.tmp"))
    stamp = built.stat().st_mtime_ns

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("quantized again")

    import onnxruntime.quantization

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", refuse)
    assert quantize_onnx(fp32) == built
    again = OnnxMiniLMEmbedder(cache_dir, query_precision="int8")
    assert built.stat().st_mtime_ns == stamp
    assert again.embed_query(TEXTS[1]) == lanes["int8"].embed_query(TEXTS[1])


def test_quantization_keeps_the_embeddings_and_ffn_down_projections_fp32() -> None:
    nodes = [
        ("EmbedLayerNormalization", "EmbedLayerNormalization_0"),
        ("MatMul", "/encoder/layer.0/attention/self/query/MatMul"),
        ("MatMul", "/encoder/layer.0/attention/output/dense/MatMul"),
        ("MatMul", "/encoder/layer.0/intermediate/dense/MatMul"),
        ("MatMul", "/encoder/layer.0/output/dense/MatMul"),
        ("Attention", "Attention_0"),
    ]
    assert kept_fp32(nodes) == [
        "EmbedLayerNormalization_0",
        "/encoder/layer.0/output/dense/MatMul",
    ]


def test_the_setting_takes_fp32_or_int8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPACK_QUERY_PRECISION", raising=False)
    assert Settings().query_precision == "fp32"  # the default, for now
    monkeypatch.setenv("CTXPACK_QUERY_PRECISION", "int8")
    assert Settings().query_precision == "int8"
    monkeypatch.setenv("CTXPACK_QUERY_PRECISION", "int4")
    with pytest.raises(ValueError, match="query_precision"):
        Settings()
    assert check_query_precision("int8") == "int8"
    for bad in ("auto", "bf16", "INT8", ""):
        with pytest.raises(ValueError, match="query_precision must be fp32 or int8"):
            check_query_precision(bad)
    # Refused before any model work.
    monkeypatch.setattr(onnx, "export_onnx", lambda *a: pytest.fail("model work"))
    with pytest.raises(ValueError, match="query_precision"):
        OnnxMiniLMEmbedder(tmp_path, query_precision="int4")


@pytest.mark.model
def test_build_embedder_passes_the_setting(
    cache_dir: Path, tmp_path: Path, lanes: dict[str, OnnxMiniLMEmbedder]
) -> None:
    settings = Settings(
        data_dir=tmp_path, model_cache_dir=cache_dir, embedder="minilm", query_precision="int8"
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    assert embedder.query_precision == "int8"
    assert embedder.embed_query(TEXTS[2]) == lanes["int8"].embed_query(TEXTS[2])
    fp32 = build_embedder(settings.model_copy(update={"query_precision": "fp32"}))
    assert isinstance(fp32, OnnxMiniLMEmbedder)
    assert fp32.embed_query(TEXTS[2]) == lanes["fp32"].embed_query(TEXTS[2])
