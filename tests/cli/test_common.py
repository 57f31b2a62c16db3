"""cli/common.py: what every ``ctxpack`` command shares. The database options a command takes
(``--data-dir``, ``--database-url``) override the environment's settings, options left out
leave them alone, and ``--no-migrate`` turns start-up migration off; a command's unit of work
runs on the process's resources as the operator."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from service.cli import main
from service.cli.common import db_options, in_session, settings_from
from service.errors import InvalidInput
from tests.conftest import make_settings


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    db_options(parser)
    parser.add_argument("--port", type=int)
    parser.add_argument("--no-migrate", action="store_true")
    return parser.parse_args(list(argv))


def test_given_options_override_the_environment_and_absent_ones_do_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CTXPACK_DATABASE_URL", "postgresql://env@db/ctxpack")
    monkeypatch.setenv("CTXPACK_PORT", "9100")
    monkeypatch.setenv("CTXPACK_MIGRATE_ON_START", "true")
    left_alone = settings_from(parsed())
    assert (left_alone.database_url, left_alone.port) == ("postgresql://env@db/ctxpack", 9100)
    assert left_alone.migrate_on_start
    given = settings_from(
        parsed("--database-url", "postgresql://cli@db/x", "--data-dir", str(tmp_path),
               "--port", "9200", "--no-migrate")
    )  # fmt: skip
    assert (given.database_url, given.data_dir, given.port) == (
        "postgresql://cli@db/x", tmp_path, 9200
    )
    assert not given.migrate_on_start


def test_a_commands_unit_of_work_commits_when_it_returns(pg_url: str) -> None:
    marker = f"cli-{uuid.uuid4().hex[:8]}"

    async def write(session):  # type: ignore[no-untyped-def]
        await session.execute(
            text("INSERT INTO orgs (org_id, name) VALUES (:i, :n)"), {"i": uuid.uuid4(), "n": marker}
        )
        return marker

    assert in_session(make_settings(pg_url), write) == marker

    async def read(session):  # type: ignore[no-untyped-def]
        return (await session.execute(text("SELECT count(*) FROM orgs WHERE name = :n"), {"n": marker})).scalar_one()

    assert in_session(make_settings(pg_url), read) == 1


def test_a_refused_setting_names_its_variable_its_value_and_what_it_takes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXPACK_QUERY_PRECISION", "int4")
    with pytest.raises(InvalidInput) as refused:
        settings_from(parsed())
    assert refused.value.field == "CTXPACK_QUERY_PRECISION"
    assert refused.value.message == (
        "invalid setting CTXPACK_QUERY_PRECISION='int4': Input should be 'fp32' or 'int8'"
    )
    monkeypatch.setenv("CTXPACK_PORT", "x")
    with pytest.raises(InvalidInput, match=r"CTXPACK_PORT='x'.*; invalid setting CTXPACK_QUERY"):
        settings_from(parsed())
    # The command says so in one line, exit status 2, before it opens anything.
    monkeypatch.delenv("CTXPACK_PORT")
    assert main(["keys", "list", "--org", "o"]) == 2
    assert capsys.readouterr().err == (
        "ctxpack: error: validation_error: invalid setting CTXPACK_QUERY_PRECISION='int4': "
        "Input should be 'fp32' or 'int8'\n"
    )
