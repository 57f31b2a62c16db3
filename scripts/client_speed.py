#!/usr/bin/env python3
"""Runs ``bench.client_speed``, the Python client's write throughput (see that module;
``python -m bench.client_speed`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.client_speed import main

if __name__ == "__main__":
    sys.exit(main())
