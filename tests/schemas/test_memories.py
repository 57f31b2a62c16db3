"""schemas/memories.py: the request models' own rules, the same for remember, a batch item and
PATCH. A key is a name (no surrounding blanks, control or invisible format characters); tags
are 1-64 characters; a date-time must be one the database can give back; metadata holds finite
numbers only; a namespace follows the grammar."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from service.schemas.memories import MemoryPatch, RememberRequest, check_key, storable_time

FACT = "The staging database listens on port 5433."


def refused_field(model: type[Any], **fields: Any) -> str:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(fields)
    return ".".join(str(p) for p in raised.value.errors()[0]["loc"])


@pytest.mark.parametrize(
    "key",
    [
        "", " db-port", "db-port ", "db\x00port", "db\nport", "db\u202eport", "db\u200bport",
        "db\u2028port", "db\ud800port",
    ],
)
def test_a_key_is_a_plain_name(key: str) -> None:
    with pytest.raises(ValueError, match="key must not"):
        check_key(key)


def test_a_key_may_hold_any_printable_text() -> None:
    for key in ("db-port", "Staging DB: port", "база/порт", "x" * 256):
        assert check_key(key) == key


def test_a_time_the_database_cannot_give_back_is_refused() -> None:
    assert storable_time(None) is None
    naive = datetime(2026, 1, 1)
    assert storable_time(naive) is naive
    edge = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(ValueError, match="outside the years 1-9999"):
        storable_time(edge)
    assert storable_time(datetime(9999, 12, 31, 18, 0, tzinfo=UTC))


@pytest.mark.parametrize("model", [RememberRequest, MemoryPatch])
def test_remember_and_patch_share_the_field_rules(model: type[Any]) -> None:
    base: dict[str, Any] = {"content": FACT}
    if model is RememberRequest:
        base["namespace"] = "alice"
    assert refused_field(model, **base, tags=[""]) == "tags"
    assert refused_field(model, **base, tags=["t" * 65]) == "tags"
    assert refused_field(model, **base, metadata={"x": [1.0, float("nan")]}) == "metadata"
    assert refused_field(model, **base, valid_at="9999-12-31T23:00:00-05:00") == "valid_at"
    assert refused_field(model, **base, project="not a slug") == "project"
    model.model_validate({**base, "tags": ["infra"], "metadata": {"x": 1.5}})


def test_remember_checks_its_namespace_key_and_unknown_fields() -> None:
    assert refused_field(RememberRequest, content=FACT, namespace="a:b:c:d") == "namespace"
    assert refused_field(RememberRequest, content=FACT, namespace="alice", key=" k") == "key"
    assert refused_field(RememberRequest, content=FACT, namespace="alice", surprise=1) == "surprise"
    made = RememberRequest(content=FACT, namespace="alice:s1")
    assert (made.type, made.tags, made.key) == ("episode", [], None)
