"""Measure the redactor on the held-out corpus (``python -m bench.redaction_blind.measure``).

HELD OUT: the corpus was written blind to the redactor's rules. Use it to measure, never to
tune (README.md says why).

Each text goes through the public entry point, ``REDACTOR.redact(text)``, the same
``Redactor`` the write pipeline uses. Reported:

- secret values: how many of the listed ``secrets`` survive verbatim in the redacted text,
  per family; ``partial``: values that did not survive whole but of which a run of
  ``FRAGMENT`` characters or more did (a value cut in two, half of it left in place);
- ordinary texts: how many had any ``keep`` substring altered (a false redaction), and how
  many ``keep`` items were altered in all, per family;
- CPU time per text (``time.process_time``, one call per text after one warm-up call).

``--json`` prints the same figures as one JSON object; ``--show-survivors`` adds the ids of
the texts with a surviving (or partial) secret and of the falsely redacted ordinary texts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.domain.redaction import REDACTOR

CORPUS = Path(__file__).with_name("corpus.jsonl")
FRAGMENT = 12  # a run this long of a secret left in the output counts as a partial leak


@dataclass
class FamilyFigures:
    texts: int = 0
    values: int = 0
    survived: int = 0
    partial: int = 0
    texts_hit: int = 0  # secret: texts with a survivor; ordinary: texts falsely redacted
    ids: list[str] = field(default_factory=list)
    partial_ids: list[str] = field(default_factory=list)


def _leaks_fragment(secret: str, out: str) -> bool:
    if len(secret) < FRAGMENT + 4:
        return False
    return any(secret[k : k + FRAGMENT] in out for k in range(len(secret) - FRAGMENT + 1))


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def measure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    secret: dict[str, FamilyFigures] = defaultdict(FamilyFigures)
    ordinary: dict[str, FamilyFigures] = defaultdict(FamilyFigures)
    cpu_ms: dict[str, list[float]] = {"secret": [], "ordinary": []}
    touched_ordinary = 0
    untouched_secret = 0
    REDACTOR.redact("warm-up: password=Warm-up-0nly")
    for row in rows:
        text = str(row["text"])
        kind = str(row["kind"])
        start = time.process_time()
        result = REDACTOR.redact(text)
        cpu_ms[kind].append((time.process_time() - start) * 1000)
        out = result.text
        if kind == "secret":
            fig = secret[str(row["family"])]
            values = [str(v) for v in row["secrets"]]
            survived = [v for v in values if v in out]
            partial = [v for v in values if v not in out and _leaks_fragment(v, out)]
            untouched_secret += not result.redacted
            fig.texts += 1
            fig.values += len(values)
            fig.survived += len(survived)
            fig.partial += len(partial)
            if survived:
                fig.texts_hit += 1
                fig.ids.append(str(row["id"]))
            elif partial:
                fig.partial_ids.append(str(row["id"]))
        else:
            fig = ordinary[str(row["family"])]
            keep = [str(v) for v in row["keep"]]
            altered = [v for v in keep if v not in out]
            touched_ordinary += result.redacted
            fig.texts += 1
            fig.values += len(keep)
            fig.survived += len(altered)  # for ordinary texts: keep items altered
            if altered:
                fig.texts_hit += 1
                fig.ids.append(str(row["id"]))

    def ms(values: list[float]) -> dict[str, float]:
        if not values:
            return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
        ordered = sorted(values)
        return {
            "mean": round(statistics.fmean(values), 3),
            "p50": round(ordered[len(ordered) // 2], 3),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
            "max": round(ordered[-1], 3),
        }

    return {
        "secret": {
            "texts": sum(f.texts for f in secret.values()),
            "values": sum(f.values for f in secret.values()),
            "survived": sum(f.survived for f in secret.values()),
            "partial": sum(f.partial for f in secret.values()),
            "texts_with_survivor": sum(f.texts_hit for f in secret.values()),
            "texts_untouched": untouched_secret,
            "families": {
                name: {
                    "texts": f.texts,
                    "values": f.values,
                    "survived": f.survived,
                    "partial": f.partial,
                    "ids": f.ids,
                    "partial_ids": f.partial_ids,
                }
                for name, f in sorted(secret.items())
            },
        },
        "ordinary": {
            "texts": sum(f.texts for f in ordinary.values()),
            "keep_items": sum(f.values for f in ordinary.values()),
            "texts_false_redacted": sum(f.texts_hit for f in ordinary.values()),
            "keep_items_altered": sum(f.survived for f in ordinary.values()),
            "texts_touched": touched_ordinary,
            "families": {
                name: {
                    "texts": f.texts,
                    "keep_items": f.values,
                    "texts_false_redacted": f.texts_hit,
                    "keep_items_altered": f.survived,
                    "ids": f.ids,
                }
                for name, f in sorted(ordinary.items())
            },
        },
        "cpu_ms_per_text": {
            "all": ms(cpu_ms["secret"] + cpu_ms["ordinary"]),
            "secret": ms(cpu_ms["secret"]),
            "ordinary": ms(cpu_ms["ordinary"]),
        },
    }


def report(figures: dict[str, Any], show_ids: bool) -> str:
    s = figures["secret"]
    o = figures["ordinary"]
    cpu = figures["cpu_ms_per_text"]
    lines = [
        f"secret texts: {s['texts']}, secret values: {s['values']}, "
        f"surviving: {s['survived']} ({100 * s['survived'] / max(1, s['values']):.1f}%), "
        f"partial: {s['partial']}, texts with a survivor: {s['texts_with_survivor']}, "
        f"texts not touched at all: {s['texts_untouched']}",
        "",
        f"{'secret family':<24}{'texts':>6}{'values':>8}{'survived':>10}{'partial':>9}",
    ]
    for name, f in s["families"].items():
        lines.append(
            f"{name:<24}{f['texts']:>6}{f['values']:>8}{f['survived']:>10}{f['partial']:>9}"
        )
        if show_ids and (f["ids"] or f["partial_ids"]):
            if f["ids"]:
                lines.append(f"    survivors: {' '.join(f['ids'])}")
            if f["partial_ids"]:
                lines.append(f"    partial: {' '.join(f['partial_ids'])}")
    lines += [
        "",
        f"ordinary texts: {o['texts']}, keep items: {o['keep_items']}, "
        f"falsely redacted texts: {o['texts_false_redacted']}, "
        f"keep items altered: {o['keep_items_altered']}, "
        f"texts with any redaction: {o['texts_touched']}",
        "",
        f"{'ordinary family':<24}{'texts':>6}{'keep':>6}{'false-red. texts':>18}{'items':>7}",
    ]
    for name, f in o["families"].items():
        lines.append(
            f"{name:<24}{f['texts']:>6}{f['keep_items']:>6}"
            f"{f['texts_false_redacted']:>18}{f['keep_items_altered']:>7}"
        )
        if show_ids and f["ids"]:
            lines.append(f"    false: {' '.join(f['ids'])}")
    lines += ["", "CPU ms per text (process time):"]
    for kind, m in cpu.items():
        lines.append(
            f"  {kind:<9} mean {m['mean']:.3f}  p50 {m['p50']:.3f}  "
            f"p95 {m['p95']:.3f}  max {m['max']:.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--show-survivors",
        action="store_true",
        help="list the ids of texts with surviving secrets and of falsely redacted texts",
    )
    args = parser.parse_args(argv)
    figures = measure(load(args.corpus))
    if args.json:
        if not args.show_survivors:
            for part in ("secret", "ordinary"):
                for f in figures[part]["families"].values():
                    f.pop("ids", None)
                    f.pop("partial_ids", None)
        print(json.dumps(figures, indent=2))
    else:
        print(report(figures, args.show_survivors))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
