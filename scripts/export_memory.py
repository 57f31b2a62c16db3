#!/usr/bin/env python3
"""Runs ``bench.export_memory``, the peak memory of `ctxpack export` at growing sizes (see that module; ``python -m bench.export_memory`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.export_memory import main

if __name__ == "__main__":
    sys.exit(main())
