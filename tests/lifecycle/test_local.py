"""lifecycle/local.py: what the lifecycle commands run on when they work on the database
directly: an operator caller with every right in one org (audited as ``ctxpack-cli`` under a
key id no key has), the model named in an export's header without loading it, and the
process's resources opened for one command (no model unless asked, no revocation listener)."""

from __future__ import annotations

import uuid

from service.config import Settings
from service.lifecycle.local import OPERATOR_KEY_ID, OPERATOR_NAME, model_id, open_local, operator
from tests.conftest import make_settings


def test_the_operator_has_every_right_in_its_org_only() -> None:
    org = uuid.uuid4()
    caller = operator(org)
    assert (caller.org_id, caller.key_id, caller.key_name) == (org, OPERATOR_KEY_ID, OPERATOR_NAME)
    for scope in ("read", "write", "admin"):
        caller.require(scope)
    assert caller.may_write_project(None) and caller.visible_namespaces("a:b") == ["a", "a:b"]
    assert OPERATOR_KEY_ID == uuid.UUID(int=0)


def test_the_model_is_named_without_loading_it() -> None:
    assert model_id(Settings(embedder="minilm")) == "all-MiniLM-L6-v2"
    assert model_id(Settings(embedder="minilm-torch")) == "all-MiniLM-L6-v2"
    assert model_id(Settings(embedder="openai", embedder_model="m")) == "openai:m"
    assert model_id(Settings(embedder="fake")) == "fake"


async def test_a_command_opens_the_database_without_the_model_unless_asked(pg_url: str) -> None:
    async with open_local(make_settings(pg_url), with_embedder=False) as resources:
        assert not resources.has_embedder
        await resources.ping()
    async with open_local(make_settings(pg_url)) as resources:
        assert resources.has_embedder
