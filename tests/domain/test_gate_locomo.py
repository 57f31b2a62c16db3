"""The write gate on real dialogue: LoCoMo's evidence turns all pass, chit-chat does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.gate_report import GateReport, evaluate, find_locomo_dir


@pytest.fixture(scope="module")
def report() -> GateReport:
    locomo_dir = find_locomo_dir()
    if locomo_dir is None:
        pytest.skip("LoCoMo data set not found (set CTXPACK_LOCOMO_DIR)")
    return evaluate(locomo_dir, max_examples=1_000)


def test_no_evidence_turn_is_rejected(report: GateReport) -> None:
    assert report.turns == 5882
    assert report.evidence_turns == 1430
    assert report.evidence_rejected == [], report.evidence_rejected


def test_some_but_few_turns_are_rejected(report: GateReport) -> None:
    # Calibrated at 135 of 5,882 (2.3%), all fragments; the band leaves room
    # for tuning without letting the gate go silent or greedy.
    assert 50 <= report.rejected <= 300, report.by_code
    assert set(report.by_code) == {"fragment"}, report.by_code


@pytest.mark.parametrize("text", ["Bye!", "Thanks!", "Take care!", "See ya!", ";)"])
def test_chit_chat_turns_are_rejected_as_fragments(report: GateReport, text: str) -> None:
    assert text in report.examples["fragment"]


def test_report_script_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.gate_report import main

    locomo_dir = find_locomo_dir()
    if locomo_dir is None:
        pytest.skip("LoCoMo data set not found (set CTXPACK_LOCOMO_DIR)")
    assert main(["--dir", str(Path(locomo_dir)), "--examples", "2"]) == 0
    out = capsys.readouterr().out
    assert "evidence turns rejected: 0" in out
    assert "fragment" in out
