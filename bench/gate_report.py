"""Run the write gate over the LoCoMo dialogue turns and report what it rejects.

Usage:
    python -m bench.gate_report [--dir PATH] [--examples N]

The gate must never reject a turn that a LoCoMo question cites as evidence;
the script exits with status 1 if it does. Rejected chit-chat ("Bye!",
"Thanks!") is expected and listed with a few examples per reason code.

The data set is looked up in ``--dir``, then ``$CTXPACK_LOCOMO_DIR``, then
``shared/bench/locomo`` next to the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from service.domain.write_gate import GateConfig, WriteGate

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class GateReport:
    """What the gate did to one data set."""

    turns: int = 0
    evidence_turns: int = 0
    rejected: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    accepted_by_code: Counter[str] = field(default_factory=Counter)
    evidence_rejected: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)
    examples: dict[str, list[str]] = field(default_factory=dict)


def find_locomo_dir(explicit: str | None = None) -> Path | None:
    """Return the LoCoMo directory, or None when it is not on this machine."""
    candidates = [
        explicit,
        os.environ.get("CTXPACK_LOCOMO_DIR"),
        REPO_ROOT.parent / "shared/bench/locomo",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "memories.jsonl").is_file():
            return Path(candidate)
    return None


def evaluate(locomo_dir: Path, gate: WriteGate | None = None, max_examples: int = 5) -> GateReport:
    """Check every LoCoMo turn with the gate.

    Args:
        locomo_dir: Directory holding ``memories.jsonl`` and ``queries.jsonl``.
        gate: The gate to evaluate; default thresholds when omitted.
        max_examples: Rejected texts kept per reason code.

    Returns:
        Counts per reason code and the evidence turns that were rejected.
    """
    gate = gate or WriteGate(GateConfig())
    evidence: set[str] = set()
    with (locomo_dir / "queries.jsonl").open(encoding="utf-8") as queries:
        for line in queries:
            evidence.update(json.loads(line)["gold_ids"])
    report = GateReport(evidence_turns=len(evidence))
    with (locomo_dir / "memories.jsonl").open(encoding="utf-8") as memories:
        for line in memories:
            turn = json.loads(line)
            report.turns += 1
            verdict = gate.check(turn["text"])
            if verdict.accepted:
                report.accepted_by_code.update(verdict.codes)
                continue
            report.rejected += 1
            report.by_code.update(verdict.codes)
            for code in verdict.codes:
                kept = report.examples.setdefault(code, [])
                if len(kept) < max_examples:
                    kept.append(turn["text"])
            if turn["id"] in evidence:
                report.evidence_rejected.append((turn["id"], verdict.codes, turn["text"]))
    return report


def main(argv: list[str] | None = None) -> int:
    """Print the report; return 1 if any evidence turn was rejected."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", help="LoCoMo directory (memories.jsonl, queries.jsonl)")
    parser.add_argument("--examples", type=int, default=5, help="examples per reason code")
    args = parser.parse_args(argv)

    locomo_dir = find_locomo_dir(args.dir)
    if locomo_dir is None:
        print("LoCoMo not found: pass --dir or set CTXPACK_LOCOMO_DIR", file=sys.stderr)
        return 2
    report = evaluate(locomo_dir, max_examples=args.examples)

    print(f"LoCoMo: {locomo_dir}")
    print(f"turns total:            {report.turns}")
    print(f"evidence turns:         {report.evidence_turns}")
    print(f"rejected total:         {report.rejected} ({report.rejected / report.turns:.1%})")
    for code, n in report.by_code.most_common():
        print(f"  {code:<22}{n}")
    print("accepted by code:")
    for code, n in report.accepted_by_code.most_common():
        print(f"  {code:<22}{n}")
    print(f"evidence turns rejected: {len(report.evidence_rejected)} (must be 0)")
    for turn_id, codes, text in report.evidence_rejected:
        print(f"  {turn_id} {','.join(codes)}: {text!r}")
    for code, texts in report.examples.items():
        print(f"examples of {code}:")
        for text in texts:
            print(f"  {text!r}")
    return 1 if report.evidence_rejected else 0


if __name__ == "__main__":
    sys.exit(main())
