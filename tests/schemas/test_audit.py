"""schemas/audit.py: an audit listing's times are ISO 8601 only (a number would be read as
unix seconds, so it is refused) and a time without a zone is UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from service.schemas.audit import AuditQuery, as_utc, iso_only


@pytest.mark.parametrize("value", [1767225600, 1.5, "1767225600", " -3.2e4 ", ".5"])
def test_a_number_is_not_a_time(value: object) -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        iso_only(value)
    with pytest.raises(ValidationError):
        AuditQuery.model_validate({"since": value})


def test_a_time_without_a_zone_is_utc() -> None:
    assert as_utc(datetime(2026, 3, 1, 12)) == datetime(2026, 3, 1, 12, tzinfo=UTC)
    zoned = datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert as_utc(zoned) is zoned and as_utc(None) is None
    query = AuditQuery.model_validate({"since": "2026-03-01", "until": "2026-03-02T10:00:00+02:00"})
    assert query.since == datetime(2026, 3, 1, tzinfo=UTC)
    assert query.until == datetime(2026, 3, 2, 8, tzinfo=UTC)


def test_paging_is_bounded_and_unknown_filters_refused() -> None:
    for bad in ({"limit": 0}, {"offset": -1}, {"surprise": 1}):
        with pytest.raises(ValidationError):
            AuditQuery.model_validate(bad)
