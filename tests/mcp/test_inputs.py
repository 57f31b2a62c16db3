"""mcp/inputs.py: the tools' inputs that have no HTTP body take the HTTP endpoint's names and
bounds and stand for its request; text Postgres cannot store is refused by the tools as the
JSON guard refuses it over HTTP."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from service.errors import InvalidInput
from service.mcp.inputs import (
    ContextInput,
    EraseNamespaceInput,
    ForgetInput,
    ListMemoriesInput,
    RecallArtifactInput,
    WakeInput,
    unstorable_text,
)
from service.schemas.memories import MemoryQuery


def test_unstorable_text_names_the_first_field_with_a_nul_or_lone_surrogate() -> None:
    assert unstorable_text({"content": "fine é 😀", "tags": ["a", "b"]}) is None
    nul = unstorable_text({"content": "ok", "metadata": {"deep": ["x", "y\x00"]}})
    assert isinstance(nul, InvalidInput)
    assert nul.details["field"] == "metadata.deep.1"
    assert "NUL characters" in nul.message
    key = unstorable_text({"metadata": {"\ud800": 1}})
    assert key is not None and "lone surrogates" in key.message
    assert key.details["field"] == "metadata.\ud800"
    whole = unstorable_text("\x00")
    assert whole is not None and whole.details["field"] == "arguments"


def test_list_memories_stands_for_the_http_query_without_its_byte_budget() -> None:
    given = ListMemoriesInput(namespace="alice:*", tag="infra", limit=5, max_bytes=None)
    query = given.request()
    assert isinstance(query, MemoryQuery)
    assert (query.namespace, query.tag, query.limit, query.offset) == ("alice:*", "infra", 5, 0)
    assert ListMemoriesInput().max_bytes == 20_000  # a result is bounded unless asked
    for bad in ({"limit": 0}, {"limit": 201}, {"max_bytes": 511}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            ListMemoriesInput.model_validate(bad)


def test_forget_takes_a_memory_id() -> None:
    memory_id = uuid.uuid4()
    assert ForgetInput(id=memory_id).request().memory_id == memory_id
    with pytest.raises(ValidationError):
        ForgetInput.model_validate({"id": "not-a-uuid"})


def test_erasing_a_namespace_needs_it_repeated() -> None:
    assert EraseNamespaceInput(namespace="alice", confirm="alice").request().namespace == "alice"
    with pytest.raises(InvalidInput) as refused:
        EraseNamespaceInput(namespace="alice", confirm="alice:s1").request()
    assert refused.value.details["field"] == "confirm"


def test_context_needs_a_goal_and_wake_does_not_and_neither_sends_its_text_limits() -> None:
    with pytest.raises(ValidationError):
        ContextInput.model_validate({"namespace": "alice"})
    body = ContextInput(goal="ship it", namespace="alice", max_bytes=1000, head=3).request()
    assert body.goal == "ship it" and body.namespace == "alice"
    assert "max_bytes" not in body.model_dump() and "head" not in body.model_dump()
    woken = WakeInput(namespace="alice").request()
    assert woken.layer == "wake" and woken.goal is None


def test_recall_artifact_fields_are_names_without_commas() -> None:
    artifact = uuid.uuid4()
    query = RecallArtifactInput(artifact_id=artifact, fields=["tries", "base_s"]).request()
    assert (query.artifact_id, query.fields) == (artifact, "tries,base_s")
    assert RecallArtifactInput(artifact_id=artifact).request().fields is None
    for bad in (["a,b"], [" "], ["x" * 201], []):
        with pytest.raises(ValidationError):
            RecallArtifactInput(artifact_id=artifact, fields=bad)
