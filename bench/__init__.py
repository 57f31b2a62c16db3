"""Benchmarks and evaluations (``python -m bench.<name>``)."""
