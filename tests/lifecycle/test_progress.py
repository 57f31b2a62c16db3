"""lifecycle/progress.py: a long command's progress on stderr. Off a terminal it writes a
plain line at most every ``every_seconds`` (count, share of the total, rate, ETA) and a final
line with the time taken; on a terminal, a tqdm bar."""

from __future__ import annotations

import io

import pytest

from service.lifecycle import progress
from service.lifecycle.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(progress.time, "monotonic", fake)
    return fake


def test_off_a_terminal_a_plain_line_every_few_seconds_and_a_final_one(clock: Clock) -> None:
    out = io.StringIO()
    with Progress("ingest", 100, unit="turn", stream=out, tty=False, every_seconds=5) as p:
        clock.now += 2
        p.update(10)
        assert out.getvalue() == ""  # not yet: less than 5 s since the start
        clock.now += 3
        p.update(10)
        clock.now += 1
        p.update(5)  # 1 s after the last line: none
    lines = out.getvalue().splitlines()
    assert lines == [
        "ingest: 20/100 (20%), 4.0 turn/s, ETA 20s",
        "ingest: 25/100 (25%), 4.2 turn/s, in 6.0s",
    ]


def test_without_a_total_the_lines_say_the_count_and_rate(clock: Clock) -> None:
    out = io.StringIO()
    with Progress("export", None, stream=out, tty=False) as p:
        clock.now += 2
        p.update(4)
    assert out.getvalue() == "export: 4, 2.0 item/s, in 2.0s\n"


def test_on_a_terminal_a_bar_counts_and_takes_a_new_total() -> None:
    out = io.StringIO()
    with Progress("import", 10, stream=out, tty=True) as p:
        p.update(3, batch=1)
        p.set_total(20)
        p.update(2)
        assert (p.done, p._bar.total) == (5, 20)
    assert "import" in out.getvalue()
