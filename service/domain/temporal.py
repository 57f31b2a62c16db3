"""Dates in goals: "camping in June", "in May 2023", "last week" -> the periods they name.

A pack whose goal names a period boosts the candidates whose ``valid_at`` falls in it
(``ranking.DATE_BOOST``, applied in ``store/retrieval.py``). It is a boost only: a memory
without ``valid_at`` (most flat writes) scores as before, and nothing is filtered out.

Recognised, case-insensitively:

- a month with a year, "May 2023", "8 May 2023", "May 8, 2023": that month (or that day);
- a month alone after "in", "during", "since", "of", "on": that month in each of the last
  ``YEARS_BACK`` years and this one (which year a chat means is unknown);
- a year alone, "in 2022": that year;
- relative periods, counted back from ``now``: "today", "yesterday", "this/last week",
  "this/last month", "this/last year", "N days/weeks/months ago".

"may" as a verb is not a month: the month alone needs its preposition, and "May 2023" a year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
YEARS_BACK = 10
# At most this many periods per goal (a goal listing every month is not about a date).
MAX_PERIODS = 24

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_MONTH_YEAR = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+)?({_MONTH})\.?,?(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?,?)?"
    rf"\s+((?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_MONTH_ALONE = re.compile(
    rf"\b(?:in|during|since|of|on|early|late|mid)\s+({_MONTH})\b", re.IGNORECASE
)
_YEAR = re.compile(r"\b(?:in|during|since|of)\s+((?:19|20)\d\d)\b", re.IGNORECASE)
_AGO = re.compile(r"\b(\d{1,2}|a|one|two|three|four|five|six)\s+(day|week|month)s?\s+ago\b", re.I)
_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@dataclass(frozen=True)
class Period:
    """A half-open interval [start, end) of time."""

    start: datetime
    end: datetime


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end)


def _day(year: int, month: int, day: int) -> Period | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return Period(start, start + timedelta(days=1))


def _relative(goal: str, now: datetime) -> list[Period]:
    low = goal.casefold()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=today.weekday())
    month = today.replace(day=1)
    out: list[Period] = []
    if re.search(r"\btoday\b", low):
        out.append(Period(today, today + timedelta(days=1)))
    if re.search(r"\byesterday\b", low):
        out.append(Period(today - timedelta(days=1), today))
    if re.search(r"\bthis week\b", low):
        out.append(Period(week, week + timedelta(days=7)))
    if re.search(r"\blast week\b", low):
        out.append(Period(week - timedelta(days=7), week))
    if re.search(r"\bthis month\b", low):
        out.append(_month(month.year, month.month))
    if re.search(r"\blast month\b", low):
        prev = month - timedelta(days=1)
        out.append(_month(prev.year, prev.month))
    if re.search(r"\bthis year\b", low):
        out.append(
            Period(datetime(now.year, 1, 1, tzinfo=UTC), datetime(now.year + 1, 1, 1, tzinfo=UTC))
        )
    if re.search(r"\blast year\b", low):
        out.append(
            Period(datetime(now.year - 1, 1, 1, tzinfo=UTC), datetime(now.year, 1, 1, tzinfo=UTC))
        )
    for count, unit in _AGO.findall(low):
        n = _WORDS.get(count) or int(count)
        days = {"day": 1, "week": 7, "month": 30}[unit] * n
        # "3 weeks ago": around then, half a unit either side.
        half = timedelta(days={"day": 1, "week": 4, "month": 15}[unit])
        at = today - timedelta(days=days)
        out.append(Period(at - half, at + half))
    return out


def goal_periods(goal: str, now: datetime | None = None) -> list[Period]:
    """The periods ``goal`` names (see the module docstring), at most ``MAX_PERIODS``.

    Args:
        goal: the goal as asked.
        now: the reference for relative periods (default: the current UTC time).

    Returns:
        The periods, in the order found; empty when the goal names none.
    """
    now = now or datetime.now(UTC)
    out: list[Period] = []
    taken: list[tuple[int, int]] = []
    for m in _MONTH_YEAR.finditer(goal):
        day = m.group(1) or m.group(3)
        year, month = int(m.group(4)), MONTHS[m.group(2).casefold()]
        period = _day(year, month, int(day)) if day else _month(year, month)
        if period:
            out.append(period)
        taken.append(m.span())
    for m in _MONTH_ALONE.finditer(goal):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        month = MONTHS[m.group(1).casefold()]
        out += [_month(year, month) for year in range(now.year - YEARS_BACK, now.year + 1)]
    for m in _YEAR.finditer(goal):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        year = int(m.group(1))
        out.append(Period(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)))
    out += _relative(goal, now)
    return out[:MAX_PERIODS] if len(out) <= MAX_PERIODS else []
