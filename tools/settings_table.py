"""Regenerate the README's configuration table from service.config.Settings.

python tools/settings_table.py          # print the table
python tools/settings_table.py --write  # replace it in README.md between the markers
"""

from __future__ import annotations

import sys
from pathlib import Path

from service.config import Settings

START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def table() -> str:
    rows = ["| env var | default | what it does |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        if info.default_factory is not None:
            default = "`~/.local/share/ctxpack`" if name == "data_dir" else "(computed)"
        elif info.default is None:
            default = "unset"
        else:
            default = f"`{info.default}`"
        desc = (info.description or "").replace("|", "\\|")
        rows.append(f"| `CTXPACK_{name.upper()}` | {default} | {desc} |")
    return "\n".join(rows)


def main() -> int:
    text = table()
    if "--write" not in sys.argv:
        print(text)
        return 0
    readme = Path(__file__).resolve().parents[1] / "README.md"
    body = readme.read_text()
    head, rest = body.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{text}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
