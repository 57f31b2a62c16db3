"""``ctxpack bench``: run the benchmark (scripts/bench.py) with this interpreter.

    ctxpack bench [--sizes 10000,100000] [--big] [--quick] [--json OUT] [--skip-peers] ...

Every argument is handed to scripts/bench.py unchanged (``ctxpack bench --help`` shows them).
The benchmark lives in the source tree, not in the installed package, and needs the ``bench``
extra (``pip install -e '.[bench]'``); ``make bench`` sets both up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from service.cli import register_command
from service.config import Settings
from service.errors import InvalidInput

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench.py"


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    if not SCRIPT.exists():
        raise InvalidInput(
            "bench", f"{SCRIPT} not found: run `ctxpack bench` from a source checkout"
        )
    return subprocess.call([sys.executable, str(SCRIPT), *args.bench_args])


def _register(sub: Any) -> None:
    parser = sub.add_parser(
        "bench",
        help="benchmark quality (LoCoMo) and speed against LangGraph and mem0",
        description="Run scripts/bench.py; every argument is passed through to it.",
        add_help=False,
        prefix_chars="+",  # so that every `-x`/`--xy` is left for scripts/bench.py
    )
    parser.add_argument("bench_args", nargs="*")
    parser.set_defaults(handler=cmd_bench)


register_command(_register)
