"""cli/bench.py: ``ctxpack bench`` hands every argument to ``python -m bench`` unchanged, in a
child process (the peers' dependencies never load into the service), and says how to install
the package when it is missing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from service.cli import bench as bench_command
from service.cli import build_parser
from service.config import Settings
from service.errors import InvalidInput


def test_every_argument_is_passed_through(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(["bench", "--sizes", "10000", "--quick", "-x"])
    assert args.bench_args == ["--sizes", "10000", "--quick", "-x"]
    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "call", lambda argv: ran.append(argv) or 0)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert bench_command.cmd_bench(args, Settings()) == 0
    assert ran == [[sys.executable, "-m", "bench", "--sizes", "10000", "--quick", "-x"]]


def test_without_the_bench_package_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    args = build_parser().parse_args(["bench"])
    with pytest.raises(InvalidInput, match=r"pip install -e '\.\[bench\]'"):
        bench_command.cmd_bench(args, Settings())
