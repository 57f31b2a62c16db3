"""The audit trail: writing it (``record``, and for read calls optionally the batched
``read_queue``), reading it (``trail``), replaying a recorded context call (``replay``) and
pruning it (``retention``). See each module's docstring for its
rules.

The names of ``record``, ``trail`` and ``retention`` are re-exported here
(``audit_service.record(...)``); ``replay`` is imported as ``service.domain.audit.replay``,
since it compiles packs through ``domain.context``, which records through this package.
"""

from __future__ import annotations

from service.domain.audit.read_queue import (
    ReadAuditQueue,
    attach,
    settle,
)
from service.domain.audit.record import (
    ERASED,
    AuditAction,
    AuditContext,
    erase_from_trail,
    record,
)
from service.domain.audit.retention import PRUNE_BATCH, PruneResult, prune_audit, run_retention
from service.domain.audit.trail import (
    decode_cursor,
    encode_cursor,
    event_of,
    export_audit,
    get_audit,
    list_audit,
    resolve_org,
    summary_of,
    tail_audit,
    visibility,
)

__all__ = [
    "ERASED",
    "PRUNE_BATCH",
    "AuditAction",
    "AuditContext",
    "PruneResult",
    "ReadAuditQueue",
    "attach",
    "decode_cursor",
    "encode_cursor",
    "erase_from_trail",
    "event_of",
    "export_audit",
    "get_audit",
    "list_audit",
    "prune_audit",
    "record",
    "resolve_org",
    "run_retention",
    "settle",
    "summary_of",
    "tail_audit",
    "visibility",
]
