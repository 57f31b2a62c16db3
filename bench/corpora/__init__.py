"""Generated retrieval corpora for ``bench.crossval``, each with its generator.

Every corpus has LoCoMo's shape, so one loader and one scorer serve all three:

- ``memories``: ``{id, group, session, timestamp, content, type}``; ``group`` is the
  namespace (one conversation, project or user), consecutive records of one ``session``
  are the ones an ingest-style load links (``follows`` / ``precedes``), ``timestamp`` is
  ISO 8601 and becomes ``valid_at`` in that load;
- ``queries``: ``{qid, group, query, gold_ids, category_name}``.

    python -m bench.corpora.agent      # writes bench/corpora/agent.json
    python -m bench.corpora.personal   # writes bench/corpora/personal.json

Generators are deterministic (a fixed seed), so the committed JSON is what they write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def write(name: str, corpus: dict[str, Any]) -> Path:
    """Write ``corpus`` as ``bench/corpora/<name>.json`` (one record per line, diff-friendly)."""
    path = HERE / f"{name}.json"
    lines = ["{", f'"name": {json.dumps(name)},', '"memories": [']
    lines.append(",\n".join(json.dumps(m, sort_keys=True) for m in corpus["memories"]))
    lines += ["],", '"queries": [']
    lines.append(",\n".join(json.dumps(q, sort_keys=True) for q in corpus["queries"]))
    lines += ["]", "}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def read(name: str) -> dict[str, Any]:
    """A committed corpus: ``{"memories": [...], "queries": [...]}``."""
    data: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text())
    return data
