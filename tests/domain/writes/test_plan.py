"""The write plan (domain/writes/plan.py), rule by rule, without a database: what one
prepared write does given what the store found."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from service.config import Settings
from service.domain.auth import Caller
from service.domain.write_pipeline import WritePipeline
from service.domain.writes.plan import (
    embed_text,
    imported_embed_text,
    plan_artifact_memory,
    plan_import,
    plan_keyed,
    plan_plain,
    plan_update,
    row_values,
    supersedes_head,
    taken_key,
    update_values,
)
from service.domain.writes.prepare import WriteItem, prepare, prepare_update
from service.errors import Conflict, SharedMemoryReadOnly
from service.schemas.memories import RememberRequest
from service.store.memories import Holder

ORG = uuid.uuid4()
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
GOOD = "The staging database listens on port 5433; the default 5432 is the legacy cluster."
PIPELINE = WritePipeline.for_settings(Settings())


def caller() -> Caller:
    return Caller(org_id=ORG, key_id=uuid.uuid4(), key_name="t", scopes=frozenset({"read", "write"}),
                  namespace_prefixes=(), projects=())


def item(**fields: Any) -> WriteItem:
    req = RememberRequest(namespace="u:s", content=fields.pop("content", GOOD), **fields)
    prepared = prepare(0, req, caller(), Settings(), PIPELINE, "")
    assert prepared.rejection is None
    return prepared


def holder(key: str | None, content_hash: str, *, superseded: bool = False,
           project: str | None = None) -> Holder:
    return Holder(uuid.uuid4(), key, content_hash, uuid.uuid4() if superseded else None, project)


# --- rows: only redacted text, never the request's own ----------------------------------


def test_the_row_holds_the_redacted_text_and_the_embedded_text_is_the_rows() -> None:
    it = item(content=f"{GOOD} The bot uses {SECRET}.", metadata={"token": SECRET}, tags=["db"])
    row = row_values(ORG, it)
    assert SECRET not in repr(row)
    assert row["content"] == it.content
    assert "REDACTED" in row["content"]
    assert row["content_hash"] == it.hash
    assert (row["org_id"], row["namespace"], row["tags"]) == (ORG, "u:s", ["db"])
    assert "id" not in row
    assert "embedding" not in row
    assert embed_text(it) == it.content  # the derived name is a prefix: embedded once
    assert SECRET not in embed_text(it)


# --- a write without a key ----------------------------------------------------------------


def test_no_copy_is_an_insert_with_the_row_and_its_text() -> None:
    it = item()
    plan = plan_plain(ORG, it, None)
    assert (plan.action, plan.status) == ("insert", "created")
    assert plan.values == row_values(ORG, it)
    assert plan.embed_text == embed_text(it)


def test_a_current_copy_is_a_duplicate_naming_it() -> None:
    copy = uuid.uuid4()
    plan = plan_plain(ORG, item(), (copy, True))
    assert (plan.action, plan.status, plan.existing_id) == ("duplicate", "duplicate", copy)
    assert plan.values == {}
    assert plan.embed_text is None


def test_a_superseded_copy_is_stored_again_superseding_its_chain() -> None:
    copy = uuid.uuid4()
    plan = plan_plain(ORG, item(), (copy, False))
    assert (plan.action, plan.status, plan.existing_id) == ("supersede", "created", copy)
    assert plan.values["content"] == GOOD


def test_a_superseded_copy_with_an_explicit_supersedes_is_a_plain_insert() -> None:
    plan = plan_plain(ORG, item(supersedes=uuid.uuid4()), (uuid.uuid4(), False))
    assert plan.action == "insert"
    assert plan.existing_id is None


@dataclass
class End:
    id: uuid.UUID
    namespace: str
    project: str | None
    agent_id: str | None


@pytest.mark.parametrize(
    ("end", "fields", "may_write", "expected"),
    [
        (End(uuid.uuid4(), "u:s", None, None), {}, True, True),
        (End(uuid.uuid4(), "u:s", None, None), {}, False, False),  # out of write reach
        (End(uuid.uuid4(), "u", None, None), {}, True, False),  # another namespace
        (End(uuid.uuid4(), "u:s", None, "bot"), {}, True, False),  # a diary the new one is not in
        (End(uuid.uuid4(), "u:s", "p", None), {}, True, True),  # the new memory is shared
        (End(uuid.uuid4(), "u:s", None, None), {"project": "p"}, True, False),  # narrower
        (None, {}, True, False),
    ],
)
def test_a_reassertion_supersedes_only_an_end_every_reader_can_follow(
    end: End | None, fields: dict[str, Any], may_write: bool, expected: bool
) -> None:
    req = RememberRequest(namespace="u:s", content=GOOD, **fields)
    assert supersedes_head(req, end, may_write) is expected


# --- keyed writes ------------------------------------------------------------------------------


def test_a_new_key_inserts_with_the_key_in_the_row() -> None:
    it = item(key="staging-db")
    plan = plan_keyed(ORG, it, None, None, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("insert", "created", None)
    assert plan.values == {**row_values(ORG, it), "key": "staging-db"}


def test_other_content_under_the_key_inserts_and_supersedes_the_holder() -> None:
    it = item(key="k")
    current = holder("k", "other")
    plan = plan_keyed(ORG, it, current, None, [])
    assert (plan.action, plan.status, plan.superseded_id) == ("insert", "updated", current.id)


def test_an_unkeyed_copy_takes_the_key_as_an_update() -> None:
    it = item(key="k")
    copy = holder(None, it.hash)
    plan = plan_keyed(ORG, it, None, copy, [])
    assert (plan.action, plan.existing_id, plan.values) == ("update", copy.id, {"key": "k"})
    assert plan.embed_text is None


def test_the_same_content_under_the_key_is_a_duplicate() -> None:
    it = item(key="k")
    current = holder("k", it.hash)
    plan = plan_keyed(ORG, it, current, current, [])
    assert (plan.action, plan.status, plan.existing_id) == ("duplicate", "duplicate", current.id)


def test_a_copy_under_another_key_is_a_conflict_naming_it() -> None:
    it = item(key="k")
    copy = holder("other", it.hash)
    plan = plan_keyed(ORG, it, None, copy, [])
    assert plan.action == "conflict"
    assert isinstance(plan.error, Conflict)
    with pytest.raises(Conflict) as raised:
        plan.refuse()
    assert raised.value.details["existing_id"] == str(copy.id)


def test_a_shared_holder_is_read_only_to_a_project_key() -> None:
    with pytest.raises(SharedMemoryReadOnly):
        plan_keyed(ORG, item(key="k", project="p"), holder("k", "other"), None, ["p"])


# --- import ----------------------------------------------------------------------------------

TIMES: dict[str, datetime | None] = {
    "created_at": datetime(2026, 1, 2, tzinfo=UTC),
    "updated_at": datetime(2026, 1, 3, tzinfo=UTC),
    "expires_at": None,
}


def test_an_import_keeps_its_id_times_and_the_derived_hash() -> None:
    it, mid = item(), uuid.uuid4()
    plan = plan_import(ORG, it, mid, None, set(), "derived", TIMES)
    assert plan.action == "insert"
    assert plan.values == {**row_values(ORG, it), "id": mid, "content_hash": "derived", **TIMES}
    assert plan.embed_text == embed_text(it)


def test_an_imported_artifact_memory_embeds_name_over_summary() -> None:
    it = item(type="artifact", name="Deploy report", metadata={"artifact_id": str(uuid.uuid4())})
    assert imported_embed_text(it) == f"Deploy report\n{it.content}"
    assert plan_import(ORG, it, uuid.uuid4(), None, set(), "h", TIMES).embed_text == imported_embed_text(it)


def test_an_import_whose_key_another_memory_holds_is_a_duplicate_or_a_conflict() -> None:
    it, mid = item(key="k"), uuid.uuid4()
    same = holder("k", "h")
    assert plan_import(ORG, it, mid, same, set(), "h", TIMES).action == "duplicate"
    other = plan_import(ORG, it, mid, holder("k", "x"), set(), "h", TIMES)
    assert other.action == "conflict"
    assert other.error is not None


def test_an_import_replaces_a_holder_the_file_says_was_replaced() -> None:
    it, mid, held = item(key="k"), uuid.uuid4(), holder("k", "x")
    assert plan_import(ORG, it, mid, held, {held.id}, "h", TIMES).action == "insert"
    mine = Holder(mid, "k", "x", None, None)
    assert plan_import(ORG, it, mid, mine, set(), "h", TIMES).action == "insert"


# --- PATCH -------------------------------------------------------------------------------------


@dataclass
class Row:
    id: uuid.UUID
    namespace: str
    name: str
    content: str
    content_hash: str
    project: str | None
    agent_id: str | None
    superseded_by: uuid.UUID | None
    type: str = "episode"


def row(name: str | None = None) -> Row:
    content = "Deploys freeze on Fridays after noon."
    return Row(uuid.uuid4(), "u:s", name or "Deploys freeze on Fridays after noon", content,
               "h0", None, None, None)


def test_new_content_rederives_a_derived_name_and_is_embedded() -> None:
    r = row()
    patch = prepare_update({"content": GOOD}, r.type, r.name, r.content, PIPELINE)
    values = update_values(r, patch)
    assert values["content"] == GOOD
    assert values["name"] == "The staging database listens on port 5433; the default 5432 is the legacy…"
    plan = plan_update(r, values, None)
    assert (plan.action, plan.existing_id) == ("update", r.id)
    assert plan.embed_text == GOOD


def test_new_content_keeps_an_explicit_name_redacted_again() -> None:
    r = row(name=f"Freeze rule {SECRET}")
    patch = prepare_update({"content": GOOD}, r.type, r.name, r.content, PIPELINE)
    values = update_values(r, patch)
    assert values["name"].startswith("Freeze rule [")
    assert SECRET not in values["name"]
    assert sum(patch.redactions.values()) == 1


def test_a_change_without_text_is_not_embedded_again() -> None:
    r = row()
    values = update_values(r, prepare_update({"tags": ["a"]}, r.type, r.name, r.content, PIPELINE))
    assert values == {"tags": ["a"]}
    assert taken_key(r, values) is None
    assert plan_update(r, values, None).embed_text is None


def test_a_taken_content_key_is_a_conflict_naming_the_field() -> None:
    r = row()
    values = update_values(r, prepare_update({"project": "p"}, r.type, r.name, r.content, PIPELINE))
    assert taken_key(r, values) == ("u:s", "p", None, "h0")
    other = uuid.uuid4()
    plan = plan_update(r, values, other)
    assert plan.action == "conflict"
    with pytest.raises(Conflict) as raised:
        plan.refuse()
    assert raised.value.details["field"] == "project"


def test_a_superseded_memory_takes_no_content_key() -> None:
    r = row()
    r.superseded_by = uuid.uuid4()
    values = update_values(r, prepare_update({"content": GOOD}, r.type, r.name, r.content, PIPELINE))
    assert taken_key(r, values) is None


# --- the artifact's memory ---------------------------------------------------------------


def test_the_artifact_memory_is_an_insert_of_its_summary() -> None:
    aid = uuid.uuid4()
    plan = plan_artifact_memory(ORG, artifact_id=aid, namespace="u:s", project=None,
                                name="Report", summary="Report: JSON object", content_hash="a",
                                metadata={"artifact_id": str(aid)})
    assert plan.action == "insert"
    assert plan.values["type"] == "artifact"
    assert plan.values["content"] == "Report: JSON object"
    assert plan.values["source"] == f"artifact:{aid}"
    assert plan.embed_text == "Report\nReport: JSON object"
