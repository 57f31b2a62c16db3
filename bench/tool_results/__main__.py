"""The tool-result envelope on outputs that tools really produce.

    python -m bench.tool_results [--budget 800] [--out bench-results/tool-results.json]

Over the committed corpus (``bench/tool_results/corpus.jsonl``, made by
``python -m bench.tool_results.generate``), for each strategy of the envelope and for the
seed's naive pipeline (first-n truncation to the same budget, *then* the seed's regexes):
tokens before and after, the share of labelled answers that survive, the planted secrets
that survive (a secret survives when any 12 characters of it do), and CPU seconds per MB of
input. Tokens are counted with the service's tokenizer (all-MiniLM-L6-v2 WordPiece, the
context pack's); when ``bpe_openai`` can be imported (it carries OpenAI's BPE tables, no
download), the corpus is also counted in cl100k_base and the ratio printed.

The seed's own example (an 80 KB log behind ``curl -H 'Authorization: Bearer sk-…'``) is
reported beside the table. CPU figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.tool_results.generate import CORPUS
from service.domain.tool_results import build_envelope, first_n
from service.embedding.minilm import count_tokens

# The seed's ToolResultEnvelope.DEFAULT_SECRET_PATTERNS, as written there.
SEED_PATTERNS = [
    (r'(?:api[_-]?key|apikey|api_token|access_token|secret)["\s:=]+["\x27]?([A-Za-z0-9_\-\.]{20,})', "API_KEY"),
    (r'(?:password|passwd|pwd)["\s:=]+["\x27]?([^"\x27&\s]{4,})', "PASSWORD"),
    (r'(?:token|auth)["\s:=]+["\x27]?([A-Za-z0-9_\-\.]{16,})', "TOKEN"),
    (r'(?:private[_-]?key|privkey)["\s:=]+["\x27]?([A-Za-z0-9+/=]{32,})', "PRIVATE_KEY"),
    (r"(?:bearer|basic)\s+([A-Za-z0-9_\-\.=]{16,})", "AUTH_HEADER"),
    (r"ghp_[A-Za-z0-9]{36}", "GITHUB_TOKEN"),
    (r"glpat-[A-Za-z0-9\-]{20,}", "GITLAB_TOKEN"),
    (r"sk-[A-Za-z0-9]{32,}", "OPENAI_KEY"),
]
PIECE = 12


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def seed_serialize(result: Any) -> str:
    """The seed's ``_serialize``: text as is, anything else ``json.dumps``."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def naive(case: dict[str, Any], budget: int) -> str:
    """The seed's pipeline at the same budget: first-n tokens of the raw output, then its
    regexes."""
    text, _ = first_n(seed_serialize(case["result"]), budget, count_tokens, marker=False)
    for pattern, label in SEED_PATTERNS:
        text = re.sub(pattern, f"[{label}:REDACTED]", text, flags=re.IGNORECASE)
    return text


def survives(secret: str, text: str) -> bool:
    if len(secret) <= PIECE:
        return secret in text
    return any(secret[i : i + PIECE] in text for i in range(len(secret) - PIECE + 1))


def kept(answer: str, text: str) -> bool:
    return answer in text or answer in re.sub(r'":\s+', '":', text)


Strategy = Callable[[dict[str, Any], int], str]


def envelope(strategy: str, with_fields: bool = False) -> Strategy:
    def run(case: dict[str, Any], budget: int) -> str:
        fields = case["fields"] if with_fields and case["fields"] else None
        chosen = "auto" if fields else strategy
        return build_envelope(case["result"], budget, count_tokens, strategy=chosen, fields=fields).content  # type: ignore[arg-type]

    return run


STRATEGIES: dict[str, Strategy] = {
    "envelope, fields where the agent names them": envelope("auto", with_fields=True),
    "envelope, auto (no fields)": envelope("auto"),
    "text (head, tail, error lines)": envelope("text"),
    "json (automatic; text for text)": envelope("json"),
    "summary (shape only)": envelope("summary"),
    "first-n, redacted first": envelope("first_n"),
    "naive first-n, then the seed's regexes": naive,
}


def measure(cases: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    raw = [seed_serialize(c["result"]) for c in cases]
    megabytes = sum(len(t.encode()) for t in raw) / 1e6
    before = sum(count_tokens_long(t) for t in raw)
    rows = []
    for name, run in STRATEGIES.items():
        started = time.process_time()
        outputs = [run(c, budget) for c in cases]
        cpu = time.process_time() - started
        after = sum(count_tokens(o) for o in outputs)
        answers = sum(kept(c["answer"], o) for c, o in zip(cases, outputs, strict=True))
        secrets = [
            (c["id"], s)
            for c, o in zip(cases, outputs, strict=True)
            for s in c["secrets"]
            if survives(s, o)
        ]
        over = sum(count_tokens(o) > budget for o in outputs)
        rows.append(
            {
                "strategy": name,
                "tokens_before": before,
                "tokens_after": after,
                "reduction": round(1 - after / before, 4),
                "answers_kept": answers,
                "answers_total": len(cases),
                "secrets_surviving": len(secrets),
                "secrets_total": sum(len(c["secrets"]) for c in cases),
                "surviving": secrets[:20],
                "over_budget": over,
                "cpu_s_per_mb": round(cpu / megabytes, 3),
                "missed_answers": [
                    c["id"] for c, o in zip(cases, outputs, strict=True) if not kept(c["answer"], o)
                ],
            }
        )
    return rows


def count_tokens_long(text: str) -> int:
    from service.domain.tool_results import count_long

    return count_long(text, count_tokens)


def bpe_ratio(cases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """cl100k_base tokens / WordPiece tokens over the corpus, when ``bpe_openai`` is there."""
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return None
    enc = bpe_openai.get_encoding("cl100k_base")
    wp = bpe = 0
    per_family: dict[str, list[int]] = {}
    for c in cases:
        text = seed_serialize(c["result"])
        a, b = count_tokens_long(text), len(enc.encode(text))
        wp += a
        bpe += b
        fam = per_family.setdefault(c["family"], [0, 0])
        fam[0] += a
        fam[1] += b
    return {
        "encoding": "cl100k_base",
        "wordpiece_tokens": wp,
        "bpe_tokens": bpe,
        "bpe_per_wordpiece": round(bpe / wp, 3),
        "per_family": {k: round(v[1] / v[0], 3) for k, v in per_family.items()},
    }


def table(rows: list[dict[str, Any]], budget: int) -> str:
    out = [
        f"| strategy ({budget}-token budget) | tokens before | tokens after | fewer | answers kept "
        "| secrets surviving | CPU s/MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['strategy']} | {r['tokens_before']:,} | {r['tokens_after']:,} | "
            f"{r['reduction']:.1%} | {r['answers_kept']}/{r['answers_total']} "
            f"({r['answers_kept'] / r['answers_total']:.0%}) | "
            f"{r['secrets_surviving']}/{r['secrets_total']} | {r['cpu_s_per_mb']} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_results", description=__doc__)
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=Path("bench-results/tool-results.json"))
    args = parser.parse_args()
    cases = load(args.corpus)
    corpus = [c for c in cases if c["family"] != "seed"]
    seed = [c for c in cases if c["family"] == "seed"]
    rows = measure(corpus, args.budget)
    seed_rows = measure(seed, args.budget)
    ratio = bpe_ratio(corpus)
    families: dict[str, list[int]] = {}
    best = STRATEGIES["envelope, fields where the agent names them"]
    for c in corpus:
        f = families.setdefault(c["family"], [0, 0])
        f[0] += kept(c["answer"], best(c, args.budget))
        f[1] += 1
    print(table(rows, args.budget))
    print()
    print(f"Per family (envelope, fields where named): {json.dumps(families)}")
    print()
    print("The seed's example (80 KB log, bearer token in the curl line):")
    print(table([r for r in seed_rows if r["strategy"] in (
        "envelope, auto (no fields)", "naive first-n, then the seed's regexes")], args.budget))
    if ratio:
        print(f"\ncl100k_base tokens per WordPiece token: {ratio['bpe_per_wordpiece']} "
              f"({ratio['per_family']})")
    report = {
        "budget": args.budget,
        "cases": len(corpus),
        "megabytes": round(sum(len(seed_serialize(c["result"]).encode()) for c in corpus) / 1e6, 3),
        "tokenizer": "all-MiniLM-L6-v2 WordPiece",
        "rows": rows,
        "per_family_answers": families,
        "seed_example": seed_rows,
        "bpe": ratio,
        "note": "CPU measured on a shared 2-core machine under load from other sessions",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
