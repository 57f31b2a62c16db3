"""Lifecycle tools of the ``ctxpack`` command: bulk ingest, export and import, erase.

The rules they apply live in domain/ (remember's write path, domain/erase.py,
domain/expiry.py) and their SQL in store/lifecycle.py; this package reads files, drives
batches, shows progress and prints summaries.
"""
