#!/usr/bin/env python3
"""Runs ``bench.console``, the render time of each console page at N memories (see that module; ``python -m bench.console`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.console import main

if __name__ == "__main__":
    main()
