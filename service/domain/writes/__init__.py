"""The write path of memories: one place for what every write does after its text.

- ``prepare`` (writes/prepare.py): the key's rights, then the write pipeline (validate ->
  redact -> gate -> hash) and the expiry, into a ``WriteItem`` (a PATCH: ``prepare_update``
  into an ``UpdateItem``); ``validate_links`` checks ``related`` and ``supersedes`` within
  reach.
- ``plan`` (writes/plan.py): pure; from a prepared item and what the store found, a
  ``WritePlan``: insert, update, duplicate, conflict or supersede, with the row values and
  the text to embed. ``keyed`` (writes/keyed.py) holds the keyed-write rules it applies.
- ``apply`` (writes/apply.py): looks up what the store holds, plans, then purge -> embed ->
  one INSERT (``MemoryRepository.insert_rows``) or UPDATE -> links -> projects, and a
  duplicate's life.

remember and its batch (domain/remember.py), PATCH (domain/memories.py), the artifact's
memory (domain/artifacts.py) and import (lifecycle/transfer.py) are callers.
"""
