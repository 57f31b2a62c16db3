#!/usr/bin/env python3
"""Runs ``bench.locomo_eval``, the LoCoMo quality evaluation of the service alone (see that
module; ``python -m bench.locomo_eval`` does the same)."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo_eval import main

if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
