"""service/domain/temporal.py: the periods a goal names, absolute and relative."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.domain.temporal import MAX_PERIODS, YEARS_BACK, Period, goal_periods

NOW = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("goal", "period"),
    [
        ("What did Mel paint in July 2023?", Period(_day(2023, 7, 1), _day(2023, 8, 1))),
        ("the talk on 8 May, 2023", Period(_day(2023, 5, 8), _day(2023, 5, 9))),
        ("notes from May 8th, 2023", Period(_day(2023, 5, 8), _day(2023, 5, 9))),
        ("Dec 2022 release", Period(_day(2022, 12, 1), _day(2023, 1, 1))),
        ("trips in 2022", Period(_day(2022, 1, 1), _day(2023, 1, 1))),
        ("what broke yesterday", Period(_day(2026, 11, 25), _day(2026, 11, 26))),
        ("decisions from last week", Period(_day(2026, 11, 16), _day(2026, 11, 23))),
        ("last month's incidents", Period(_day(2026, 10, 1), _day(2026, 11, 1))),
        ("the outage two weeks ago", Period(_day(2026, 11, 8), _day(2026, 11, 16))),
    ],
)
def test_a_named_period_is_found(goal: str, period: Period) -> None:
    assert goal_periods(goal, NOW) == [period]


def test_a_month_without_a_year_means_that_month_of_recent_years() -> None:
    periods = goal_periods("When did Melanie go camping in June?", NOW)
    assert len(periods) == YEARS_BACK + 1
    assert periods[-1] == Period(_day(2026, 6, 1), _day(2026, 7, 1))
    assert all(p.start.month == 6 for p in periods)


@pytest.mark.parametrize(
    "goal",
    [
        "You may want to rotate the keys",
        "Fix the flaky test in the payments pipeline",
        "port 2023 of the service",
        "",
    ],
)
def test_no_period_without_a_date(goal: str) -> None:
    assert goal_periods(goal, NOW) == []


def test_a_goal_naming_too_many_periods_names_none() -> None:
    goal = " ".join(f"in {m}" for m in ("June", "July", "August"))  # 33 > MAX_PERIODS
    assert 3 * (YEARS_BACK + 1) > MAX_PERIODS
    assert goal_periods(goal, NOW) == []


def test_an_impossible_day_is_skipped() -> None:
    assert goal_periods("on 31 February 2023", NOW) == []
