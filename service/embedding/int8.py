"""The int8 query lane for MiniLM: the exported fp32 graph, fused and dynamically quantized.

``quantize_onnx`` builds it once, locally, from the ONNX file ``onnx.export_onnx`` wrote
(nothing is downloaded) and caches it beside that file: onnxruntime's transformer optimizer
fuses the BERT graph (attention, layer norms, GELU), then ``quantize_dynamic`` stores the
weights of its MatMuls as int8, one scale per output channel, and quantizes activations on
the fly. Two kinds of node stay fp32, because they carry the activation outliers that a
per-tensor int8 scale flattens: the embedding layer and each layer's FFN down-projection
(``layer.N/output/dense``). Naive int8 (per tensor, every node) gave a cosine of ~0.93 to
fp32 on some texts; this recipe is the ``ort-int8`` variant of bench/embed_speed.py.

Only queries run on it (``query_precision``): a stored vector is compared with every later
query, so documents keep fp32 (or bf16) weights, and an int8 query is measured against them
in bench/query_lane.py."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "int8")
# all-MiniLM-L6-v2's attention: 12 heads over a hidden size of 384.
NUM_HEADS = 12
HIDDEN_SIZE = 384
_QUANTIZE_LOCK = threading.Lock()


def check_query_precision(setting: str) -> str:
    """``setting`` if it names a query lane, else a ValueError naming the setting."""
    if setting not in PRECISIONS:
        raise ValueError(f"query_precision must be fp32 or int8, not {setting!r}")
    return setting


def int8_path(fp32_path: Path) -> Path:
    """Where the int8 graph of ``fp32_path`` is cached: beside it."""
    return fp32_path.with_name(f"{fp32_path.stem}.int8{fp32_path.suffix}")


def kept_fp32(nodes: list[tuple[str, str]]) -> list[str]:
    """Names of the nodes quantization leaves in fp32, from ``(op_type, name)`` pairs of the
    fused graph: the embedding layer and the FFN down-projections (not the attention's
    output projection, ``attention/output/dense``)."""
    return [
        name
        for op, name in nodes
        if op == "EmbedLayerNormalization"
        or (op == "MatMul" and name.endswith("/output/dense/MatMul") and "attention" not in name)
    ]


def quantize_onnx(fp32_path: Path) -> Path:
    """The int8 graph of ``fp32_path``, built on first use and cached beside it.

    Runs under a lock and writes atomically (a temporary file renamed into place), so
    concurrent starts never see half a file; a second call returns the cached file."""
    path = int8_path(fp32_path)
    with _QUANTIZE_LOCK:
        if path.exists():
            return path
        from onnx import TensorProto
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers.optimizer import optimize_model

        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        # The optimizer and the quantizer warn about ops they leave alone (the graph is
        # checked against fp32 in tests/embedding/test_int8.py).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fused = optimize_model(
                str(fp32_path), model_type="bert", num_heads=NUM_HEADS, hidden_size=HIDDEN_SIZE
            )
            exclude = kept_fp32([(n.op_type, n.name) for n in fused.model.graph.node])
            quantize_dynamic(
                fused.model,
                str(tmp),
                per_channel=True,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=exclude,
                # Shape inference cannot type the outputs of the fused contrib ops.
                extra_options={"DefaultTensorType": TensorProto.FLOAT},
            )
        tmp.replace(path)
        log.info("onnx_quantized", extra={"path": str(path), "kept_fp32": len(exclude)})
        return path
