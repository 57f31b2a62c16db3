"""service/schemas/namespaces.py: the namespace grammar, as the request models check it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.errors import InvalidInput
from service.schemas.artifacts import ArtifactCreate
from service.schemas.context import ContextRequest
from service.schemas.memories import RememberRequest
from service.schemas.namespaces import check_grammar

INVALID = ["", "a:b:c:d", "alice:", ":alice", "alice::s", "al ice", "a/b", "x" * 65]


@pytest.mark.parametrize("value", ["alice", "alice:s1", "alice:s1:t-2", "a.b_c-d:X", "x" * 64])
def test_valid_namespaces_are_returned_unchanged(value: str) -> None:
    assert check_grammar(value) == value


@pytest.mark.parametrize("value", INVALID)
def test_invalid_namespaces_name_the_field(value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_grammar(value, "items.3.namespace")
    assert caught.value.details["field"] == "items.3.namespace"


@pytest.mark.parametrize("value", INVALID)
def test_every_request_model_checks_the_grammar(value: str) -> None:
    bodies = [
        (RememberRequest, {"namespace": value, "content": "The export runs nightly."}),
        (ArtifactCreate, {"namespace": value, "name": "n", "body": {}}),
        (ContextRequest, {"namespace": value, "goal": "g"}),
    ]
    for model, body in bodies:
        with pytest.raises(ValidationError) as caught:
            model.model_validate(body)
        assert [e["loc"] for e in caught.value.errors()] == [("namespace",)]


def test_the_grammar_alone_does_not_look_for_secrets() -> None:
    # A secret in a namespace is the domain's refusal (domain/namespaces.py:parse_namespace),
    # made before the namespace is named anywhere: the request model takes its shape only.
    aws = "AKIA" + "Z9" * 8
    assert check_grammar(f"alice:{aws}") == f"alice:{aws}"
    assert RememberRequest(namespace=f"alice:{aws}", content="c").namespace == f"alice:{aws}"
