"""Benchmarks: importable, run with ``python -m bench.<name>``."""
