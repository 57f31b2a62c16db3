"""config.py: every setting is read from ``CTXPACK_<FIELD>`` and documented (the README's
table is generated from the descriptions, tests/test_readme_settings.py); the write gate's
thresholds are settings too, one ``CTXPACK_GATE_<FIELD>`` per ``GateConfig`` field with its
default and the line of GateConfig's docstring that explains it."""

from __future__ import annotations

import dataclasses

import pytest

from service.config import GateConfig, Settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> pytest.MonkeyPatch:
    """No CTXPACK_ variable and no .env file: what a setting reads is what the test sets."""
    import os

    for name in list(os.environ):
        if name.startswith("CTXPACK_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    return monkeypatch


def test_every_setting_is_documented() -> None:
    undocumented = [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    assert undocumented == []


def test_a_setting_is_read_from_its_environment_variable(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().port == 8080
    clean_env.setenv("CTXPACK_PORT", "9001")
    clean_env.setenv("CTXPACK_RATE_LIMIT_PER_MINUTE", "0")
    settings = Settings()
    assert (settings.port, settings.rate_limit_per_minute) == (9001, 0)


def test_a_setting_given_directly_wins_over_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("CTXPACK_PORT", "9001")
    assert Settings(port=9002).port == 9002


def test_the_server_is_embedded_unless_a_database_url_is_set(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().embedded
    clean_env.setenv("CTXPACK_DATABASE_URL", "postgresql://u@db.example:5432/ctxpack")
    assert not Settings().embedded


def test_each_gate_threshold_is_a_setting_with_its_default_and_its_docs() -> None:
    for f in dataclasses.fields(GateConfig):
        setting = Settings.model_fields[f"gate_{f.name}"]
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        assert setting.default == default, f.name
        description = setting.description or ""
        assert description.startswith("Write gate: ")
        assert description != f"Write gate: {f.name}", f"{f.name} is not in GateConfig's docstring"


def test_a_gate_threshold_is_read_from_its_environment_variable(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("CTXPACK_GATE_MIN_WORDS", "7")
    clean_env.setenv("CTXPACK_GATE_CODE_TYPES", '["procedure"]')
    settings = Settings()
    assert settings.gate_min_words == 7
    assert settings.gate_code_types == ["procedure"]
