"""Does `ctxpack ingest` load LoCoMo as well as the benchmark's own loader? Same recall?

Against a running ctxpack (the real model), in namespaces of their own:

1. the benchmark's loader (``bench.locomo_eval.load``, links on) stores every turn of
   memories.jsonl under ``<run>b-<conversation>``;
2. ``ctxpack ingest`` stores the same conversations, read from LoCoMo's own JSON layout
   (rebuilt from memories.jsonl: samples, ``session_<n>`` turn lists and their date times),
   under ``<run>i-{conversation}``, with ``--sessions metadata --links`` (the benchmark asks
   each question at its conversation's namespace, so the turns stay in one namespace);
3. every question is asked of both (``bench.locomo_eval.ask``, layer deep_search, k=10)
   and recall@5/@10 is printed per category, with the number of questions whose top-10
   differs between the two loads.

    python -m bench.locomo_ingest_parity --url http://127.0.0.1:8765 --key ctxp_...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench import locomo_eval
from bench.report import write_json
from service.remote import api_key_from_env


def locomo_json(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """LoCoMo's locomo10.json layout, rebuilt from the flat turns."""
    samples: dict[str, dict[str, Any]] = {}
    for t in turns:
        conv = samples.setdefault(t["group"], {"sample_id": t["group"], "conversation": {}})["conversation"]
        key = f"session_{t['session']}"
        conv.setdefault(key, []).append(
            {"speaker": t["speaker"], "dia_id": t["id"].split(":", 1)[1], "text": t["text"]}
        )
        conv[f"{key}_date_time"] = t["timestamp"]
    return list(samples.values())


async def load_both(
    client: httpx.AsyncClient,
    args: argparse.Namespace,
    turns: list[dict[str, Any]],
    bench_prefix: str,
    ingest_prefix: str,
    report: dict[str, Any],
) -> None:
    started = time.perf_counter()
    loaded = await locomo_eval.load(client, turns, bench_prefix, links=True)
    report["benchmark_loader"] = {"counts": loaded["counts"], "seconds": round(time.perf_counter() - started, 1)}
    print(f"benchmark loader: {loaded['counts']} in {report['benchmark_loader']['seconds']} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "locomo10.json"
        source.write_text(json.dumps(locomo_json(turns)))
        command = [
            sys.executable, "-m", "service", "ingest", str(source), "--format", "locomo",
            "--namespace", ingest_prefix + "{conversation}", "--sessions", "metadata", "--links",
            "--url", args.url, "--key", args.key, "--checkpoint", str(Path(tmp) / "resume.jsonl"),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        seconds = round(time.perf_counter() - started, 1)
    summary = json.loads(done.stdout)
    report["ctxpack_ingest"] = {"summary": summary, "seconds": seconds, "command": " ".join(command[1:])}
    print(f"ctxpack ingest: {summary} in {seconds} s", flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("CTXPACK_URL"))
    parser.add_argument("--key", default=api_key_from_env())
    parser.add_argument("--data", type=Path, default=locomo_eval.DATA)
    parser.add_argument("--run", default=f"p{uuid.uuid4().hex[:6]}", help="namespace prefix of this run")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("locomo_ingest_parity.json"))
    parser.add_argument(
        "--skip-load", action="store_true", help="only ask (both loads of --run are in already)"
    )
    args = parser.parse_args()
    if not args.url or not args.key:
        parser.error("--url and --key are required")

    turns = locomo_eval.read_jsonl(args.data / "memories.jsonl")
    queries = locomo_eval.read_jsonl(args.data / "queries.jsonl")
    bench_prefix, ingest_prefix = f"{args.run}b-", f"{args.run}i-"
    report: dict[str, Any] = {"turns": len(turns), "questions": len(queries), "run": args.run}
    headers = {"Authorization": f"Bearer {args.key}"}
    async with httpx.AsyncClient(base_url=args.url, headers=headers) as client:
        if not args.skip_load:
            await load_both(client, args, turns, bench_prefix, ingest_prefix, report)
        ks = (5, args.k)
        answers: dict[str, list[dict[str, Any]]] = {}
        for label, prefix in (("benchmark loader", bench_prefix), ("ctxpack ingest", ingest_prefix)):
            answers[label] = await locomo_eval.ask(
                client, queries, prefix, "hybrid", args.k, args.concurrency, "deep_search"
            )
        results = {label: locomo_eval.score(queries, a, ks) for label, a in answers.items()}
    pairs = list(zip(answers["benchmark loader"], answers["ctxpack ingest"], strict=True))
    differ = sum(1 for a, b in pairs if a["ranked"][: args.k] != b["ranked"][: args.k])
    differ_set = sum(1 for a, b in pairs if set(a["ranked"][: args.k]) != set(b["ranked"][: args.k]))
    recall_moved = sum(
        1
        for q, (a, b) in zip(queries, pairs, strict=True)
        if len(set(q["gold_ids"]) & set(a["ranked"][: args.k])) != len(set(q["gold_ids"]) & set(b["ranked"][: args.k]))
    )
    report.update(
        recall=results,
        questions_with_different_top_k_order=differ,
        questions_with_different_top_k_set=differ_set,
        questions_with_different_recall_at_k=recall_moved,
    )
    print()
    print(locomo_eval.table(results, ks))
    print(
        f"\nof {len(queries)} questions, top-{args.k} differs between the two loads in order: {differ}, "
        f"as a set: {differ_set}; recall@{args.k} differs: {recall_moved}"
    )
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
