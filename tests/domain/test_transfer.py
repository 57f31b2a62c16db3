"""The export file's rules (domain/transfer.py), without a database: the header, what
import refuses before writing, what a line becomes, and the hash it is stored under."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from service.config import Settings
from service.domain.artifacts import memory_hash
from service.domain.auth import Caller
from service.domain.transfer import (
    FORMAT,
    VERSION,
    artifact_row,
    check_file,
    memory_request,
    read_header,
    stored_hash,
)
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.prepare import prepare
from service.errors import InvalidInput

HEADER = {"kind": "header", "format": FORMAT, "version": VERSION, "model": "m", "dims": 3}
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def write(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def memory(**fields: Any) -> dict[str, Any]:
    return {"kind": "memory", "id": str(uuid.uuid4()), "namespace": "u", "type": "episode",
            "content": "The staging database listens on port 5433, not 5432.", **fields}


def test_a_file_must_open_with_a_header_of_this_version(tmp_path: Path) -> None:
    assert read_header(write(tmp_path, HEADER, {"kind": "end"}))["dims"] == 3
    with pytest.raises(InvalidInput, match="not a ctxpack export"):
        read_header(write(tmp_path, memory()))
    with pytest.raises(InvalidInput, match="version 2"):
        read_header(write(tmp_path, {**HEADER, "version": 2}))


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (memory(id="nope"), "id is not an id"),
        (memory(valid_at="10000-01-01T00:00:00"), "valid_at"),
        (memory(embedding=[1.0, 2.0]), "embedding"),
        (memory(relations=[{"target_id": str(uuid.uuid4()), "relationship": SECRET}]), "relationship"),
        ({"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "u", "body": "text"}, "body"),
    ],
)
def test_a_bad_line_anywhere_refuses_the_file_naming_the_line(
    tmp_path: Path, line: dict[str, Any], says: str
) -> None:
    path = write(tmp_path, HEADER, memory(), line, {"kind": "end"})
    with pytest.raises(InvalidInput, match=f"line 3: .*{says}") as raised:
        check_file(path, dims=3)
    assert raised.value.details["field"] == "file"


def test_the_file_says_which_keyed_memories_it_replaced(tmp_path: Path) -> None:
    old = memory(key="k", superseded_by=str(uuid.uuid4()))
    path = write(tmp_path, HEADER, old, memory(key="k"), {"kind": "end"})
    assert check_file(path) == {uuid.UUID(old["id"])}


def caller() -> Caller:
    return Caller(org_id=uuid.uuid4(), key_id=uuid.uuid4(), key_name="op",
                  scopes=frozenset({"admin"}))


def test_a_memory_is_stored_under_the_hash_the_service_derives() -> None:
    settings = Settings()
    pipeline = WritePipeline.for_settings(settings)
    line = memory(content_hash="forged", key="staging-db")
    req = memory_request(line)
    assert req.key == "staging-db"
    item = prepare(0, req, caller(), settings, pipeline, "")
    assert stored_hash(line, item) == item.hash != "forged"
    aid = uuid.uuid4()
    art = memory(type="artifact", metadata={"artifact_id": str(aid)}, content="Report: JSON object")
    art_item = prepare(0, memory_request(art), caller(), settings, pipeline, "")
    assert stored_hash(art, art_item) == memory_hash(aid)


def test_an_artifact_line_is_redacted_and_its_shape_derived() -> None:
    org = uuid.uuid4()
    line = {"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "u", "name": f"run {SECRET}",
            "body": {"token": SECRET, "n": 1}, "size_bytes": 1, "schema_keys": ["forged"]}
    row, redactions = artifact_row(org, 7, line)
    assert SECRET not in json.dumps(row, default=str)
    assert redactions == 2  # the name's and the body's, counted for the import's audit row
    assert row["schema_keys"] == ["token", "n"]
    assert row["size_bytes"] == len(json.dumps(row["body"], separators=(",", ":")).encode())
    with pytest.raises(InvalidInput, match="line 7"):
        artifact_row(org, 7, {"kind": "artifact", "namespace": "u"})


def test_a_line_over_the_scan_bound_is_refused_naming_the_line_and_field(tmp_path: Path) -> None:
    from service.errors import PayloadTooLarge

    limit = 1000
    fits = memory(content="x" * 400, tags=["t" * 200], metadata={"note": "y" * 300})
    assert check_file(write(tmp_path, HEADER, fits, {"kind": "end"}), max_scanned_bytes=limit) == set()
    cases = [
        (memory(content="x" * 1200), "content"),
        (memory(metadata={"note": "y" * 1200}), "metadata"),
        # No part alone is over: the field holding the most of the total is named.
        (memory(content="x" * 300, tags=["t" * 400, "u" * 400]), "tags"),
        ({"kind": "artifact", "id": str(uuid.uuid4()), "namespace": "u", "body": {"b": "z" * 1200}}, "body"),
    ]
    for line, field in cases:
        path = write(tmp_path, HEADER, memory(), line, {"kind": "end"})
        with pytest.raises(PayloadTooLarge) as refused:
            check_file(path, max_scanned_bytes=limit)
        assert refused.value.details == {"field": field}
        assert refused.value.message.startswith(f"line 3: {field}: ")
        check_file(path)  # without a bound (the file's own checks) it passes
