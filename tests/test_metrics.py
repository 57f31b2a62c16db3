"""metrics.py: what domain code reports, in ctxpack's own registry (never prometheus_client's
global one): a refused write counts each of its reason codes once, redactions by label, writes
by outcome, and nothing for zero counts. Labels are bounded sets, never content. (The HTTP
side, /metrics and the per-route counts, is tests/api/test_metrics.py.)"""

from __future__ import annotations

from prometheus_client import REGISTRY as GLOBAL

from service import metrics


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_refused_write_counts_each_reason_once() -> None:
    before = value("ctxpack_gate_rejections_total", reason="fragment")
    metrics.count_gate_rejections(["fragment", "fragment", "log_dump"])
    assert value("ctxpack_gate_rejections_total", reason="fragment") == before + 1


def test_redactions_and_writes_count_by_label_and_skip_zeros() -> None:
    token = value("ctxpack_redactions_total", label="GITHUB_TOKEN")
    email = value("ctxpack_redactions_total", label="EMAIL")
    metrics.count_redactions({"GITHUB_TOKEN": 2, "EMAIL": 0})
    assert value("ctxpack_redactions_total", label="GITHUB_TOKEN") == token + 2
    assert value("ctxpack_redactions_total", label="EMAIL") == email
    created = value("ctxpack_memory_writes_total", status="created")
    metrics.count_writes("created", 3)
    metrics.count_writes("created", 0)
    assert value("ctxpack_memory_writes_total", status="created") == created + 3


def test_packs_are_measured_in_items_tokens_and_what_was_gated_out() -> None:
    packs = value("ctxpack_pack_items_count")
    gated = value("ctxpack_pack_gated_out_total")
    metrics.observe_pack(items=7, tokens=900)
    metrics.count_gated_out(4)
    metrics.count_gated_out(0)
    assert value("ctxpack_pack_items_count") == packs + 1
    assert value("ctxpack_pack_gated_out_total") == gated + 4


def test_the_registry_is_ctxpacks_own() -> None:
    assert metrics.REGISTRY is not GLOBAL
    assert GLOBAL.get_sample_value("ctxpack_pack_gated_out_total") is None
