#!/usr/bin/env python3
"""Runs ``bench.locomo_ingest_parity``, `ctxpack ingest` against the LoCoMo benchmark's own loader (see that module; ``python -m bench.locomo_ingest_parity`` does the same)."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo_ingest_parity import main

if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
