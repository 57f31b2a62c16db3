"""One redaction pass over every field (domain/redaction/fields.py): text, lists and JSON
redacted, counts summed; identifiers holding a secret refused, naming the field."""

from __future__ import annotations

import pytest

from service.domain.redaction.fields import check_identifiers, redact_fields
from service.errors import InvalidInput

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def test_every_kind_of_field_is_redacted_and_counted_once_over_all() -> None:
    values, counts = redact_fields({
        "content": f"token {SECRET}",
        "tags": [SECRET, "db"],
        "metadata": {"nested": {"password": "hunter2"}, SECRET: 1},
        "url": None,
        "size": 3,
    })
    assert SECRET not in repr(values)
    assert values["tags"][1] == "db"
    assert values["metadata"]["nested"]["password"] == "[PASSWORD:REDACTED]"
    assert values["url"] is None
    assert values["size"] == 3
    assert counts == {"GITHUB_TOKEN": 3, "PASSWORD": 1}


def test_an_identifier_holding_a_secret_is_refused_naming_the_field_not_the_value() -> None:
    check_identifiers({"project": "payments", "agent_id": None})
    with pytest.raises(InvalidInput) as raised:
        check_identifiers({"project": "payments", "items.2.agent_id": SECRET})
    assert raised.value.details["field"] == "items.2.agent_id"
    assert SECRET not in str(raised.value)
    assert "GITHUB_TOKEN" in str(raised.value)
