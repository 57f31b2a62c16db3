"""Prometheus metrics: one registry for the process, and the few calls domain code makes.

The transports count requests themselves (``service/api/metrics.py``); domain code reports
what only it knows through the functions below, which take counts and labels, never content:

    count_gate_rejections(reasons)   a write the gate refused, once per reason code
    count_redactions(counts)         {label: n} redacted from one write
    count_writes(status, n)          memories created | duplicate | rejected
    observe_pack(items, tokens)      the size of one context pack
    count_gated_out(n)               candidates a pack left out below the relevance floor

The metrics live in a registry of their own (not prometheus_client's global one), so an
embedding application's metrics never mix with ctxpack's. Labels are bounded sets (route
templates, reason codes, redaction labels): never a raw path, a key or a namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.process_collector import ProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

# Latency buckets from 5 ms (a list) to 30 s (a big batch on the real model).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

HTTP_REQUESTS = Counter(
    "ctxpack_http_requests",
    "HTTP requests answered, by method, route template and status code.",
    ("method", "route", "status"),
    registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "ctxpack_http_request_duration_seconds",
    "Time from the first byte of a request to the end of its response, by route template.",
    ("method", "route"),
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
RATE_LIMITED = Counter(
    "ctxpack_rate_limited",
    "Calls refused with 429 because their key exceeded its rate.",
    registry=REGISTRY,
)
GATE_REJECTIONS = Counter(
    "ctxpack_gate_rejections",
    "Writes refused by the write gate, by reason code (a write may have several).",
    ("reason",),
    registry=REGISTRY,
)
REDACTIONS = Counter(
    "ctxpack_redactions",
    "Secrets and personal data redacted before storing, by label.",
    ("label",),
    registry=REGISTRY,
)
WRITES = Counter(
    "ctxpack_memory_writes",
    "Memories offered to remember, by outcome: created, duplicate or rejected.",
    ("status",),
    registry=REGISTRY,
)
PACK_ITEMS = Histogram(
    "ctxpack_pack_items",
    "Items in one context pack.",
    buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200),
    registry=REGISTRY,
)
PACK_TOKENS = Histogram(
    "ctxpack_pack_tokens",
    "Estimated tokens in one context pack.",
    buckets=(0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000),
    registry=REGISTRY,
)
GATED_OUT = Counter(
    "ctxpack_pack_gated_out",
    "Candidates left out of context packs because they fell below the relevance floor.",
    registry=REGISTRY,
)


def count_gate_rejections(reasons: Iterable[str]) -> None:
    """One refused write: count each of its reason codes once."""
    for reason in set(reasons):
        GATE_REJECTIONS.labels(reason=reason).inc()


def count_redactions(counts: Mapping[str, int]) -> None:
    """Redactions of one write, as ``{label: count}`` (the redactor's own output)."""
    for label, n in counts.items():
        if n > 0:
            REDACTIONS.labels(label=label).inc(n)


def count_writes(status: str, n: int = 1) -> None:
    """``n`` memories with outcome ``status`` (created, duplicate or rejected)."""
    if n > 0:
        WRITES.labels(status=status).inc(n)


def observe_pack(items: int, tokens: int) -> None:
    """The size of one context pack, in items and estimated tokens."""
    PACK_ITEMS.observe(items)
    PACK_TOKENS.observe(tokens)


def count_gated_out(n: int) -> None:
    """Candidates one pack left out below the relevance floor."""
    if n > 0:
        GATED_OUT.inc(n)
