#!/usr/bin/env python3
"""Runs ``bench.dedup``, what the duplicate checks cost a write (see that module; ``python -m bench.dedup`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.dedup import main

if __name__ == "__main__":
    sys.exit(main())
