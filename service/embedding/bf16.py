"""A bf16 document lane for MiniLM: the packaged model on torch with bfloat16 weights.

On CPUs with AVX512-BF16 (oneDNN runs the bf16 matmuls natively) this encodes batches with
25-35% less CPU per text than the fp32 ONNX graph, and gives the same vectors to a cosine of
0.9999 (bench/embed_speed.py, ``ort-fp32+bf16docs``). Elsewhere bf16 is emulated and slower
than fp32, so ``OnnxMiniLMEmbedder`` only uses this lane where the CPU has the flag.
The pipeline is sentence-transformers': the same WordPiece tokenizer (passed in), mean pooling
over the attention mask and L2 normalisation, both in fp32 after the bf16 forward pass."""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from service.embedding.minilm import model_dir

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether the CPU computes bf16 natively (the ``avx512_bf16`` flag; Linux only)."""
    try:
        return "avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class Bf16DocumentLane:
    """MiniLM on torch with bf16 weights, for batches of documents. Thread-safe: the model is
    only read (inference mode), and the tokenizer is a configured ``tokenizers.Tokenizer``."""

    def __init__(self, tokenizer: Any, *, threads: int = 1, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        import transformers
        from transformers import AutoModel

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        # One intra-op pool for the process, sized like onnxruntime's (embed_threads): a
        # batch here and a query on the ONNX session together use at most 2 x embed_threads.
        torch.set_num_threads(max(1, threads))
        self._torch = torch
        self._model = AutoModel.from_pretrained(
            str(model_dir()), dtype=torch.bfloat16, local_files_only=True
        ).eval()
        self._tok = tokenizer
        self._batch_size = batch_size

    def encode(self, texts: list[str]) -> Any:
        """Unit vectors (a float32 numpy array, one row per text, in order)."""
        torch = self._torch
        # Similar lengths together: less padding per batch.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = torch.empty((len(texts), self._model.config.hidden_size), dtype=torch.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self._batch_size):
                idx = order[start : start + self._batch_size]
                enc = self._tok.encode_batch([texts[i] for i in idx])
                ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
                mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.long)
                hidden = self._model(
                    input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)
                ).last_hidden_state.float()
                weights = mask.unsqueeze(-1).float()
                pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
                out[idx] = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return out.numpy()


class LazyBf16Lane:
    """Builds the bf16 lane on first use, in the background. The server loads it before it
    is ready (``app.py:_load_document_lane``: restart to /readyz 6.1 s rather than 2.0 s); a
    CLI command that never sees a batch never imports torch. A call made while it loads
    (about 4 s, mostly importing torch and transformers) is encoded in fp32 rather than
    waiting. If the load fails, documents stay on fp32."""

    def __init__(self, tokenizer: Any, *, threads: int, batch_size: int) -> None:
        self._args = (tokenizer, threads, batch_size)
        self._lane: Bf16DocumentLane | None = None
        self._loader: threading.Thread | None = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        tok, threads, batch_size = self._args
        try:
            self._lane = Bf16DocumentLane(tok, threads=threads, batch_size=batch_size)
            log.info("bf16_document_lane_loaded")
        except Exception:
            log.exception("bf16_document_lane_failed")

    def get(self, *, wait: bool = False) -> Bf16DocumentLane | None:
        """The lane, or None while it loads (``wait``: block until it is loaded or failed)."""
        if self._lane is not None:
            return self._lane
        with self._lock:
            if self._loader is None:
                self._loader = threading.Thread(
                    target=self._load, name="ctxpack-bf16-load", daemon=True
                )
                self._loader.start()
        if wait:
            self._loader.join()
        return self._lane
