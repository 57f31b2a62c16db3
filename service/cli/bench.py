"""``ctxpack bench``: run the benchmark (the ``bench`` package) with this interpreter.

    ctxpack bench [--sizes 10000,100000] [--big] [--quick] [--json OUT] [--skip-peers] ...

Every argument is handed to ``python -m bench`` unchanged (``ctxpack bench --help`` shows
them). The benchmark is the top-level ``bench`` package, installed with the ``bench`` extra
(``pip install -e '.[bench]'``, which also brings the peers it is compared with); ``make
bench`` sets it up in a venv of its own. It runs in a child process, so that its peers'
dependencies never load into this one.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from typing import Any

from service.config import Settings
from service.errors import InvalidInput


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    if importlib.util.find_spec("bench") is None:
        raise InvalidInput(
            "bench", "the bench package is not installed: pip install -e '.[bench]'"
        )
    return subprocess.call([sys.executable, "-m", "bench", *args.bench_args])


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser(
        "bench",
        help="benchmark quality (LoCoMo) and speed against LangGraph and mem0",
        description="Run the bench package (python -m bench); every argument is passed "
        "through to it.",
        add_help=False,
        prefix_chars="+",  # so that every `-x`/`--xy` is left for the benchmark
    )
    parser.add_argument("bench_args", nargs="*")
    parser.set_defaults(handler=cmd_bench)

