#!/usr/bin/env python3
"""Runs ``bench.audit_overhead``, the audit-row overhead measurement (see that module; ``python -m bench.audit_overhead`` does the same)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.audit_overhead import main

if __name__ == "__main__":
    sys.exit(main())
