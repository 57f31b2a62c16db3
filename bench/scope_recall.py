#!/usr/bin/env python3
"""Evidence recall of context packs at one big scope, over HTTP: what a wide scope's plan
(its HNSW search, its full-text probe) costs in quality, beside what it costs in time.

The store is one seeded by ``bench.context_speed --seed``, whose memories are LoCoMo turns
(``speaker: text``), each reused many times by a big user. A LoCoMo question counts when
one of its gold turns is among the scope's memories; a pack finds it when any of its first
K items holds a gold turn's text (any copy counts). The scope's texts are read from the
store (``--data-dir``, the server's ``CTXPACK_DATA_DIR``, or ``CTXPACK_DATABASE_URL``):

    python -m bench.scope_recall --url http://127.0.0.1:8765 --key ctxp_... \\
        --data-dir /tmp/ctxspeed --namespace big-u0:s1:t1 --questions 300

Prints R@5 and R@10 (percent of counted questions) and the client-side p50 / p99, with the
load average before and after. Run it against two servers (two builds on one store) to set
one plan against another: the questions are the same for the same ``--seed``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from bench.context_speed import DATA, percentiles_ms, read_jsonl, server_parser
from service.domain.namespaces import ancestors

K = (5, 10)


def gold_texts(memories: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each LoCoMo turn's id -> its text as the seed stores it (``speaker: text``)."""
    return {m["id"]: f"{m['speaker']}: {m['text']}" for m in memories}


def counted(
    questions: Sequence[dict[str, Any]], texts: dict[str, str], in_scope: set[str]
) -> list[tuple[str, set[str]]]:
    """The questions one of whose gold turns the scope holds, each with its gold texts."""
    out = []
    for q in questions:
        gold = {texts[g] for g in q.get("gold_ids", []) if g in texts}
        if gold & in_scope:
            out.append((q["query"], gold))
    return out


def found_at(contents: Sequence[str], gold: set[str]) -> int | None:
    """The rank (1-based) of the first item holding a gold text, or None."""
    for rank, content in enumerate(contents, start=1):
        if content in gold:
            return rank
    return None


def scope_contents(database_url: str, org: uuid.UUID, namespaces: list[str]) -> set[str]:
    import psycopg

    from service.store.database import libpq_url

    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT DISTINCT content FROM memories WHERE org_id = %s AND namespace = ANY(%s)",
            (org, namespaces),
        ).fetchall()
    return {r[0] for r in rows}


async def measure(
    url: str,
    key: str,
    namespace: str,
    goals: Sequence[tuple[str, set[str]]],
    retrieval: str,
    layer: str = "recall",
) -> dict[str, Any]:
    hits = dict.fromkeys(K, 0)
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        for goal, gold in goals:
            started = time.perf_counter()
            response = await client.post(
                "/v1/context",
                json={"goal": goal, "namespace": namespace, "retrieval": retrieval, "layer": layer},
            )
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            body = response.json()
            # The pack's order: its items by score, as the ranking returned them.
            items = sorted(
                (i for s in body["sections"] for i in s["items"]),
                key=lambda i: -float(i["score"]),
            )
            rank = found_at([i["content"] for i in items], gold)
            for k in K:
                hits[k] += rank is not None and rank <= k
    n = len(goals)
    return {
        "questions": n,
        **{f"R@{k}": round(100 * hits[k] / n, 2) if n else 0.0 for k in K},
        **percentiles_ms(latencies),
    }


def main() -> int:
    parser = server_parser(__doc__)
    parser.add_argument("--namespace", default="big-u0:s1:t1")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--retrieval", default="hybrid", choices=["hybrid", "lexical", "vector"])
    parser.add_argument("--layer", default="recall", choices=["recall", "deep_search"])
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args()
    if not args.url or not args.key:
        parser.error("--url and --key (or CTXPACK_URL, CTXPACK_API_KEY) are required")
    from service.config import Settings
    from service.store.database import resolve_database_url

    who = httpx.get(f"{args.url}/v1/whoami", headers={"Authorization": f"Bearer {args.key}"})
    who.raise_for_status()
    org = uuid.UUID(who.json()["org_id"])
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    in_scope = scope_contents(resolve_database_url(settings), org, ancestors(args.namespace))
    questions = counted(
        read_jsonl(DATA / "queries.jsonl"),
        gold_texts(read_jsonl(DATA / "memories.jsonl")),
        in_scope,
    )
    picked = random.Random(args.seed).sample(questions, min(args.questions, len(questions)))
    print(json.dumps({"load_before": os.getloadavg(), "scope_texts": len(in_scope)}), flush=True)
    out = asyncio.run(
        measure(args.url, args.key, args.namespace, picked, args.retrieval, args.layer)
    )
    print(json.dumps({"namespace": args.namespace, "retrieval": args.retrieval,
                      "layer": args.layer, **out}))  # fmt: skip
    print(json.dumps({"load_after": os.getloadavg()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
