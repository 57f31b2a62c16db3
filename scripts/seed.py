#!/usr/bin/env python3
"""Runs ``bench.seed``, the HTTP seeder (see that module; ``python -m bench.seed`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.seed import main

if __name__ == "__main__":
    sys.exit(main())
