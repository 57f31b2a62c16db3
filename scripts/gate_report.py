#!/usr/bin/env python3
"""Runs ``bench.gate_report``, the write gate's LoCoMo report (see that module; ``python -m bench.gate_report`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gate_report import main

if __name__ == "__main__":
    sys.exit(main())
