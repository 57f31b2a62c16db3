"""The results as tables: speed rows with the ratios against each peer (``speed_rows``), the
Markdown the run prints and tools/readme_results.py writes into the README
(``markdown_tables``), and the printed report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Write a benchmark's JSON report to ``path`` (making its folder), and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"\nwritten: {path}")


# -------------------------------------------------------------------------- report

EMBEDDER_RATIO = "batch write ÷ embedder alone"  # issue 26's target: at least 0.8


def ratio(ctx: float | str | None, peer: float | str | None, lower_is_better: bool) -> float | None:
    """How many times better ctxpack is (>1: ctxpack better; none beside an invalid figure)."""
    if not isinstance(ctx, (int, float)) or not isinstance(peer, (int, float)):
        return None
    if not ctx or not peer or any(map(math.isnan, (ctx, peer))):
        return None
    return round(peer / ctx, 2) if lower_is_better else round(ctx / peer, 2)


def speed_rows(size: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: ctxpack's figure, each peer's, and the ratios."""
    c = size.get("ctxpack", {})
    lg = size.get("langgraph", {})
    m0 = size.get("mem0", {})
    spec = [
        ("context / search p50 ms, c=1", ("context_c1", "p50_ms"), ("search_c1", "p50_ms"), True),
        ("context / search p95 ms, c=1", ("context_c1", "p95_ms"), ("search_c1", "p95_ms"), True),
        ("context / search p99 ms, c=1", ("context_c1", "p99_ms"), ("search_c1", "p99_ms"), True),
        ("context / search req/s, c=1", ("context_c1", "per_s"), ("search_c1", "per_s"), False),
        ("context / search p50 ms, c=8", ("context_c8", "p50_ms"), ("search_c8", "p50_ms"), True),
        ("context / search p99 ms, c=8", ("context_c8", "p99_ms"), ("search_c8", "p99_ms"), True),
        ("context / search req/s, c=8", ("context_c8", "per_s"), ("search_c8", "per_s"), False),
        ("single write p50 ms", ("remember_single", "p50_ms"), ("write_single", "p50_ms"), True),
        ("batch write memories/s", ("remember_batch", "per_s"), ("write_batch", "per_s"), False),
        (
            "embedder alone on the batch's texts, texts/s",
            ("remember_batch", "embedder", "per_s"),
            ("-",),
            None,
        ),
        (EMBEDDER_RATIO, ("remember_batch", "of_embedder"), ("-",), None),
        (
            "results per call, c=1 (asked: 24)",
            ("context_c1", "mean_hits"),
            ("search_c1", "mean_hits"),
            None,
        ),
    ]
    # The service's own targets (issues 3 and 4), stated for 100k memories over 1,000 users.
    targets = {
        "context / search p50 ms, c=1": "≤ 10",
        "context / search p99 ms, c=1": "≤ 25",
        "single write p50 ms": "≤ 15",
        "batch write memories/s": "≥ 400",
        EMBEDDER_RATIO: "≥ 0.8",
    }
    rows = []
    for label, cpath, ppath, lower in spec:
        cv, lv, mv = (figure(side, path) for side, path in ((c, cpath), (lg, ppath), (m0, ppath)))
        rows.append(
            {
                "metric": label,
                "ctxpack": cv,
                "langgraph": lv,
                "mem0": mv,
                "x_langgraph": ratio(cv, lv, lower) if lower is not None else None,
                "x_mem0": ratio(cv, mv, lower) if lower is not None else None,
                "target_at_100k": targets.get(label, ""),
            }
        )
    return rows


def figure(system: dict[str, Any], path: tuple[str, ...]) -> float | str | None:
    """The figure at ``path`` in one system's results; a write section whose items were not
    all stored gives its ``invalid`` reason instead (bench/measured_writes.py), so no table
    prints a rate of writes the service skipped."""
    section = system.get(path[0]) or {}
    if section.get("invalid"):
        return str(section["invalid"])
    value: Any = section
    for key in path[1:]:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) else None


def measured_writes_line(size: dict[str, Any]) -> list[str]:
    """What the measured writes of a size stored (bench/measured_writes.py); none for older
    JSON, which did not count them."""
    c = size.get("ctxpack", {})
    batch, single = c.get("remember_batch") or {}, c.get("remember_single") or {}
    if "stored" not in batch:
        return []
    line = (
        f"Measured writes, their texts new to the store: the batch stored {batch['stored']:,} "
        f"of {batch['sent']:,} and the single writes {single.get('stored', 0):,}; "
        f"{batch.get('with_near_duplicates', 0):,} of the batch came back listing near "
        "duplicates (listed, not refused)."
    )
    if batch.get("embedder"):
        pace = batch["embedder"]
        line += (
            f" The embedder alone (the server's, in the bench's process) embedded exactly the "
            f"{pace['texts']:,} texts the batch stored, in its batches, in "
            f"{fmt(pace['seconds'])} s"
        )
        if pace.get("interleaved"):
            line += ", each batch of the service followed by the embedder on its texts"
            spread = pace.get("of_embedder_per_batch")
            if spread:
                low, mid, high = spread
                line += (
                    f" (batch write ÷ embedder alone per batch: lowest {fmt(low, 2)}, "
                    f"median {fmt(mid, 2)}, highest {fmt(high, 2)})"
                )
        line += "."
    return [line]


def fmt(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def seconds_each(timed: dict[str, float]) -> str:
    """Seconds by name (index builds, settled tables) as ``ix_memories_tsv 1.2 s, ...``."""
    return ", ".join(f"{k} {v} s" for k, v in timed.items())


def render_tables(res: dict[str, Any]) -> str:
    """The results as plain-text tables (also used by tools/readme_results.py as Markdown)."""
    return "\n".join(markdown_tables(res))


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def markdown_tables(res: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    q = res.get("quality") or {}
    systems = q.get("systems") or {}
    if systems:
        cats = sorted({c for s in systems.values() for c in (s.get("by_category") or {})})
        header = ["system", "R@5", "R@10"] + [f"{c} R@10" for c in cats] + ["query p50 ms"]
        rows = []
        for name, s in systems.items():
            if "overall" not in s:
                rows.append(
                    [name, s.get("unavailable") or s.get("error") or "–"] + [""] * (len(header) - 2)
                )
                continue
            ov = s["overall"]
            rows.append(
                [name, fmt(100 * ov["r@5"]), fmt(100 * ov["r@10"])]
                + [
                    fmt(100 * (s["by_category"].get(c) or {}).get("r@10", float("nan")))
                    for c in cats
                ]
                + [fmt(s.get("query_p50_ms"))]
            )
        scored = [s for s in systems.values() if "by_category" in s]
        nq = scored[0]["overall"]["n"] if scored else 0
        lines += [
            f"**Retrieval quality** (LoCoMo, evidence recall % over {nq:,} questions; "
            f"layer deep_search, limit 10 for ctxpack, k = 10 for the others):",
            "",
        ]
        lines += [*_md_table(header, rows), ""]
        ncat = {c: (scored[0]["by_category"].get(c) or {}).get("n") for c in cats} if scored else {}
        lines.append(
            "Questions per category: " + ", ".join(f"{c} {n}" for c, n in ncat.items()) + "."
        )
        g = q.get("gate") or {}
        if g:
            lines.append(
                f"Write gate: {g['rejected']:,} of {g['turns']:,} turns rejected at write time "
                f"({', '.join(f'{k} {v}' for k, v in g['rejected_reasons'].items()) or 'none'}); "
                f"{len(g['rejected_evidence'])} of them evidence (of {g['evidence_turns']:,} evidence turns). "
                f"{g.get('duplicate', 0)} exact duplicates stored once."
            )
        lines.append("")
    sp = res.get("speed") or {}
    for size in sp.get("sizes", []):
        if size.get("skipped"):
            how = f" ({size['seed_method']})" if size.get("seed_method") else ""
            lines += [f"**Speed, {size['n']:,} memories**: skipped: {size['skipped']}{how}", ""]
            continue
        lines.append(
            f"**Speed, {size['n']:,} memories seeded** ({size.get('stored_total', 0):,} stored in "
            f"ctxpack, over {size['users']:,} users; ctxpack over HTTP, peers in process; "
            f"×: how many times better ctxpack is):"
        )
        lines.append("")
        rows = [
            [
                r["metric"],
                fmt(r["ctxpack"], 2 if r["metric"] == EMBEDDER_RATIO else 1),
                fmt(r["langgraph"]),
                fmt(r["mem0"]),
                fmt(r["x_langgraph"], 2),
                fmt(r["x_mem0"], 2),
                r.get("target_at_100k", ""),
            ]
            for r in speed_rows(size)  # from the raw figures, so older JSON renders alike
        ]
        lines += _md_table(
            [
                "metric",
                "ctxpack",
                "LangGraph",
                "mem0",
                "× LangGraph",
                "× mem0",
                "ctxpack target (100k)",
            ],
            rows,
        )
        seed = size.get("ctxpack", {}).get("seed") or {}
        lines.append("")
        if seed.get("method") == "copy":
            builds = seed.get("index_build_s") or {}
            ps = size.get("peer_seed") or {}
            lines.append(
                f"Seeding ctxpack to this size: {seed.get('sent', 0):,} more memories written "
                "straight to its table (COPY), embedded in process by the service's own embedder "
                f"({fmt(seed.get('seconds'))} s, of which embedding {fmt(seed.get('embed_seconds'))} "
                "s), to fit the run's budget; no gate or duplicate checks. Writes through the API "
                "at this size: the batch and single write rows above."
                + (
                    f" Its HNSW and GIN indexes were dropped for the load and built again from "
                    f"their own definitions ({seconds_each(builds)})."
                    if builds
                    else ""
                )
                + (
                    f" The peers got the same rows and vectors in the same pass "
                    f"({fmt(ps.get('seconds'))} s of their writes), their vector and text indexes "
                    f"rebuilt likewise ({seconds_each(ps.get('index_build_s') or {})})."
                    if ps
                    else ""
                )
                + (
                    " Then the loaded tables were vacuumed and analyzed before anything was "
                    f"timed (VACUUM (ANALYZE): {seconds_each(seed.get('settle_s') or {})}"
                    + (f"; the peers' {seconds_each(ps['settle_s'])}" if ps.get("settle_s") else "")
                    + ")."
                    if seed.get("settle_s")
                    else ""
                )
            )
        else:
            rate = seed.get("invalid") or f"{fmt(seed.get('per_s'))} memories/s, embedding included"
            lines.append(
                f"Seeding ctxpack through /v1/remember/batch: {seed.get('sent', 0):,} memories in "
                f"{fmt(seed.get('seconds'))} s ({rate})."
            )
        lines += measured_writes_line(size)
        if seed.get("vectors_reused"):
            lines.append(f"Vectors at this size: {seed['seed_method']}.")
        if size.get("seeded_earlier"):
            lines.append(
                f"Seeded earlier into {size['seeded_earlier']}; the seeding figures are that run's."
            )
        if size.get("mem0_skipped"):
            lines.append(f"mem0: {size['mem0_skipped']}.")
        lines.append("")
    growth = sp.get("growth") or {}
    if growth.get("ratio"):
        lines += [
            f"**Growth**: ctxpack context p50 (c=1) {fmt(growth['to_p50_ms'], 2)} ms at "
            f"{growth['to_n']:,} memories against {fmt(growth['from_p50_ms'], 2)} ms at "
            f"{growth['from_n']:,}: ×{fmt(growth['ratio'], 2)}"
            + (f" (target {growth['target']})." if growth.get("target") else "."),
            "",
        ]
    scope = sp.get("scope") or {}
    if scope.get("sizes"):
        lines += [
            "**Scope scaling** (one namespace holding N memories; ctxpack context over HTTP, "
            f"LangGraph search in process, k = {scope.get('k')}, c=1; ×: how many times "
            "better ctxpack is):",
            "",
        ]
        rows = []
        for s in scope["sizes"]:
            c, lg = s.get("ctxpack") or {}, s.get("langgraph") or {}
            rows.append(
                [f"{s['n']:,}"]
                + [fmt(c.get(f)) for f in ("p50_ms", "p99_ms")]
                + [fmt(lg.get(f)) for f in ("p50_ms", "p99_ms")]
                + [fmt(ratio(c.get("p50_ms"), lg.get("p50_ms"), True), 2)]
                + [fmt(c.get("mean_hits")), fmt(lg.get("mean_hits"))]
            )
        header = ["memories in the scope", "ctxpack p50 ms", "ctxpack p99 ms"]
        header += ["LangGraph p50 ms", "LangGraph p99 ms", "× LangGraph (p50)"]
        header += ["ctxpack results", "LangGraph results"]
        lines += [*_md_table(header, rows), ""]
        if scope.get("note"):
            lines += [f"Scopes: {scope['note']}.", ""]
    cs = sp.get("cold_start") or {}
    if cs:
        rows = [[k, fmt(v, 2)] for k, v in cs.items() if isinstance(v, (int, float))]
        lines += [
            "**Cold start** (process start to /readyz 200 for ctxpack; for a peer, "
            "to its first search answered; s):",
            "",
        ]
        lines += [*_md_table(["process", "seconds"], rows), ""]
    au = sp.get("audit") or {}
    if au.get("read_call"):
        r = au["read_call"]
        lines.append(
            f"**Audit row**: `record()` p50 {r['record_p50_ms']} ms in process (read call: "
            f"{r['no_audit_p50_ms']} → {r['with_audit_p50_ms']} ms, so the row adds "
            f"{r['added_p50_ms']} ms to the p50; budget 1 ms); context p50 over HTTP at the largest "
            f"size {au.get('context_p50_ms')} ms, which includes it."
        )
        lines.append("")
    return lines


def print_report(res: dict[str, Any]) -> None:
    print()
    print("ctxpack benchmark " + res["meta"]["started"])
    m = res["meta"]["machine"]
    print(
        f"machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM; "
        f"load average before {res['meta']['loadavg_before']}, after {res['meta'].get('loadavg_after')}"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in res["meta"]["versions"].items()))
    print()
    for line in markdown_tables(res):
        print(line)
    for note in res["meta"].get("notes", []):
        print("note: " + note)
    print(f"total run time: {res['meta'].get('duration_s')} s")
