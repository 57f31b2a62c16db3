"""The load script itself, small: seed through a fake-embedder server, then hold a low rate
on the real model. The real run is `make load` (100k memories, >= 2 minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import load as load_script

pytestmark = [pytest.mark.slow, pytest.mark.model]


def test_load_script_runs_clean(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code = load_script.main(
        [
            "--data-dir",
            str(tmp_path / "data"),
            "--memories",
            "300",
            "--users",
            "20",
            "--seed-embedder",
            "fake",
            "--rate",
            "1",
            "--duration",
            "10",
            "--retries",
            "0",
            "--json",
            str(report_path),
        ]
    )
    assert code == 0, report_path.read_text()
