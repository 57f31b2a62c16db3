#!/usr/bin/env python3
"""Regenerate the README's Results section from a benchmark JSON (``python -m bench``).

    python tools/readme_results.py [bench-results/bench-....json] [--readme README.md] [--print]

Without a path, the newest ``bench-results/*.json`` is used. The section is written between
the markers ``<!-- results:start -->`` and ``<!-- results:end -->``; everything else in the
README is left alone. ``--print`` writes the section to stdout instead. Every figure comes from
the JSON: the machine it ran on, its load, the versions, the command and all the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

START = "<!-- results:start -->"
END = "<!-- results:end -->"


def buffers_note(versions: dict[str, Any]) -> str:
    """`` (shared_buffers 4GB)`` when the run recorded it (runs before it did not)."""
    buffers = versions.get("shared_buffers")
    return f" (shared_buffers {buffers})" if buffers else ""


def section(res: dict[str, Any], json_path: Path) -> str:
    from bench.report import markdown_tables

    meta = res["meta"]
    m = meta["machine"]
    v = meta["versions"]
    try:
        rel = json_path.resolve().relative_to(ROOT)
    except ValueError:
        rel = json_path
    lines = [
        f"Measured by `{meta['command'].strip()}` on {meta['started'][:10]}, in "
        f"{meta['duration_s'] / 60:.1f} minutes, on {m['cpu']} ({m['cores']} cores, "
        f"{m['ram_gb']} GB RAM), load average {meta['loadavg_before']} before and "
        f"{meta.get('loadavg_after')} after (1, 5 and 15 minutes; above {m['cores']}, processes "
        f"were waiting for a core, and every timing below is slower for it). Raw figures: "
        f"[`{rel}`]({rel}).",
        "",
    ]
    phases = run_time_line(res)
    if phases:
        lines += [phases, ""]
    lines += [
        f"Versions: ctxpack {v.get('ctxpack')}; LangGraph {v.get('langgraph')} with "
        f"langgraph-checkpoint-postgres {v.get('langgraph-checkpoint-postgres')}; mem0ai "
        f"{v.get('mem0ai')}; PostgreSQL {v.get('postgresql')} with pgvector {v.get('pgvector')}"
        f"{buffers_note(v)}; "
        f"sentence-transformers {v.get('sentence-transformers')}, torch {v.get('torch')} "
        f"(all-MiniLM-L6-v2 on the CPU for everyone, {meta.get('settings', {}).get('torch_threads')} "
        f"threads).",
        "",
    ]
    lines += markdown_tables(res)
    notes = meta.get("notes") or []
    if notes:
        lines.append("Notes:")
        lines += [f"- {n}" for n in notes]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def run_time_line(res: dict[str, Any]) -> str:
    """Where the run's minutes went, from the phase timings the JSON carries."""
    meta = res["meta"]
    ph = meta.get("phase_s") or {}
    parts = []
    if "start" in ph:
        parts.append(f"start-up {ph['start'] / 60:.1f}")
    if "quality" in ph:
        parts.append(f"quality {ph['quality'] / 60:.1f}")
    for size in (res.get("speed") or {}).get("sizes", []):
        sp = size.get("phase_s")
        if sp and "measure" in sp:
            parts.append(
                f"{size['n']:,}: seeding {sp['seed'] / 60:.1f}, measuring {sp['measure'] / 60:.1f}"
            )
    if "scope" in ph:
        parts.append(f"scope scaling {ph['scope'] / 60:.1f}")
    if not parts:
        return ""
    return f"Run time {meta['duration_s'] / 60:.1f} minutes: " + "; ".join(parts) + " (minutes)."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="?", type=Path)
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--print", action="store_true", help="print the section, touch nothing")
    args = ap.parse_args()
    path = args.json
    if path is None:
        found = sorted((ROOT / "bench-results").glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            print("no bench-results/*.json; run `python -m bench` first", file=sys.stderr)
            return 1
        path = found[-1]
    text = section(json.loads(path.read_text()), path)
    if args.print:
        sys.stdout.write(text)
        return 0
    readme = args.readme.read_text()
    if START not in readme or END not in readme:
        print(
            f"{args.readme} has no {START} ... {END} markers; section not written", file=sys.stderr
        )
        sys.stdout.write(text)
        return 1
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    args.readme.write_text(f"{head}{START}\n{text}{END}{tail}")
    print(f"{args.readme}: Results section rewritten from {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
