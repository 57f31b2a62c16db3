"""mcp/results.py: a tool's success carries its payload as text and structured content; an
error is a result with ``isError`` whose body is the HTTP error body with its status, from the
error tree, a remote server's answer, or (for anything unexpected) ``internal_error`` with
nothing of the exception's message."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field, ValidationError

from service.errors import NotFound, ScopeDenied
from service.mcp.results import failed, from_exception, invalid_arguments, ok
from service.remote import RemoteError

SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def test_a_success_is_its_payload_as_text_and_structured_content() -> None:
    result = ok({"id": "m1", "n": 2}, meta={"context": {"consumed": True}})
    assert not result.is_error
    assert json.loads(result.content[0].text) == {"id": "m1", "n": 2}
    assert result.structured_content == {"id": "m1", "n": 2}
    assert result.meta == {"context": {"consumed": True}}
    assert ok({"x": 1}, text="a pack").content[0].text == "a pack"


def test_an_error_of_the_tree_is_the_http_body_with_its_status() -> None:
    result = from_exception(ScopeDenied("write"), "remember")
    assert result.is_error and result.meta is None
    error = result.structured_content["error"]  # type: ignore[index]
    assert (error["code"], error["status"], error["scope"]) == ("scope_denied", 403, "write")
    assert json.loads(result.content[0].text) == result.structured_content
    assert from_exception(NotFound("gone"), "forget").structured_content == {
        "error": {"code": "not_found", "message": "gone", "status": 404}
    }


def test_a_remote_servers_refusal_is_answered_as_it_was() -> None:
    body = {"code": "conflict", "message": "key taken", "field": "key"}
    result = from_exception(RemoteError(409, body), "remember")
    assert result.structured_content == {"error": {**body, "status": 409}}


def test_an_unexpected_error_says_nothing_of_its_message(caplog: pytest.LogCaptureFixture) -> None:
    result = from_exception(RuntimeError(f"driver said {SECRET}"), "context")
    assert result.structured_content == {
        "error": {
            "code": "internal_error",
            "message": "Internal error; see the server log",
            "status": 500,
        }
    }
    logged = [r for r in caplog.records if r.getMessage() == "tool_crashed"]
    assert logged and logged[0].exc_type == "RuntimeError"  # type: ignore[attr-defined]


class Probe(BaseModel):
    namespace: str = Field(max_length=5)
    limit: int = Field(ge=1)


def test_bad_arguments_are_the_http_422_without_the_rejected_value() -> None:
    with pytest.raises(ValidationError) as raised:
        Probe.model_validate({"namespace": SECRET, "limit": 0})
    error = invalid_arguments(raised.value)
    assert error.code == "validation_error" and error.details["field"] == "namespace"
    assert [e["field"] for e in error.details["errors"]] == ["namespace", "limit"]
    assert SECRET not in json.dumps(failed(422, error.to_dict()).structured_content)
