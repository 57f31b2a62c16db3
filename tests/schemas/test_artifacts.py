"""schemas/artifacts.py: an artifact's body is a JSON object or list of finite numbers; its
name and summary are stripped, never blank, never with NUL; its namespace follows the grammar."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from service.schemas.artifacts import ArtifactCreate


def create(**fields: Any) -> ArtifactCreate:
    return ArtifactCreate.model_validate({"namespace": "alice", "name": "t", "body": {}, **fields})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"body": "text"}, "body"),
        ({"body": 3}, "body"),
        ({"body": {"x": float("inf")}}, "body"),
        ({"name": "   "}, "name"),
        ({"summary": "a\x00b"}, "summary"),
        ({"namespace": "a:b:c:d"}, "namespace"),
        ({"project": "not a slug"}, "project"),
    ],
)
def test_a_bad_artifact_names_its_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        create(**fields)
    assert raised.value.errors()[0]["loc"][0] == field


def test_names_are_stripped_and_bodies_kept_as_sent() -> None:
    made = create(name="  retry table ", summary=" tries ", body=[{"tries": 3}, 1])
    assert (made.name, made.summary, made.body) == ("retry table", "tries", [{"tries": 3}, 1])
    assert create().summary is None
