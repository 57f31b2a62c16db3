"""The README's configuration table is generated from ``service.config.Settings``
(``python tools/settings_table.py --write``); this test fails when the two drift, so a
setting added, renamed or re-described without regenerating the table is caught."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_settings_table_is_the_settings() -> None:
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "tools" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(tool.START), readme.index(tool.END)
    shown = readme[start + len(tool.START) : end].strip()
    assert shown == tool.table().strip(), "run: python tools/settings_table.py --write"
