"""The write path of memories: one place for what every write does after its text.

- ``prepare`` (writes/prepare.py): the key's rights, then the write pipeline (validate ->
  redact -> gate -> hash) and the expiry, into a ``WriteItem``; ``validate_links`` checks
  ``related`` and ``supersedes`` within reach.
- ``keyed`` (writes/keyed.py): the pure plan of a keyed write (created, updated, duplicate,
  claim, or a 409) from what the store holds.
- ``apply`` (writes/apply.py): purge -> duplicate checks -> the keyed plan -> embed -> one
  INSERT -> links -> projects, and a duplicate's life.

remember and its batch (domain/remember.py) and import (lifecycle/transfer.py) are callers.
"""
