"""CPU cost of redaction per MB of text, worst shapes first: what bounds one write call
(``max_scanned_bytes``). Prints seconds of CPU (process time, so other load on the machine
barely moves it) per MB for JSON bodies of several shapes, each built to ``--mb`` MB, then
the CPU per ordinary sentence (it runs on every write; best of three passes over 10,000).

    python -m bench.redaction_cost [--mb 1.0] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
from collections.abc import Callable
from typing import Any

from service.domain.redaction import REDACTOR
from service.domain.redaction.fields import redact_fields


def _shapes(rng: random.Random) -> dict[str, Callable[[], Any]]:
    def tok(n: int) -> str:
        return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    words = ["password", "is", "the", "token", "deploy", "key", "=", ":"]
    return {
        "prose with keywords": lambda: {
            "text": " ".join(rng.choice([*words, tok(12)]) for _ in range(200))
        },
        "secret-named keys": lambda: {f"api_key_{i}": tok(40) for i in range(40)},
        "random tokens": lambda: {"rows": [tok(rng.randint(20, 60)) for _ in range(60)]},
        "digit groups": lambda: {
            "rows": [" ".join(str(rng.randint(0, 99999)) for _ in range(80))]
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1.0, help="size of each body, in MB")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'shape':22s} {'MB':>6s} {'CPU s':>7s} {'s/MB':>6s}")
    for name, make in _shapes(rng).items():
        body: list[Any] = []
        size = 0
        while size < args.mb * 1e6:
            part = make()
            body.append(part)
            size += len(json.dumps(part)) + 1
        started = time.process_time()
        redact_fields({"body": body})
        spent = time.process_time() - started
        print(f"{name:22s} {size / 1e6:6.2f} {spent:7.2f} {spent / (size / 1e6):6.2f}")
    print(f"ordinary sentences: {_per_sentence_ms():.4f} ms of CPU each")


ORDINARY = [
    "Caroline moved from Sweden 4 years ago and now works as a counselor.",
    "Use uv, not pip, and pin the lockfile before the release on Friday.",
    "The Fireworks headlined the festival; tickets were sold out by noon.",
    "Deploys go through the staging cluster first; prod needs two approvals.",
    "The invoice job retries three times, then pages the on-call engineer.",
]


def _per_sentence_ms(count: int = 10_000) -> float:
    sentences = [ORDINARY[i % len(ORDINARY)] + f" ({i})" for i in range(count)]
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for sentence in sentences:
            REDACTOR.redact(sentence)
        best = min(best, time.process_time() - started)
    return best * 1000 / count


if __name__ == "__main__":
    main()
