"""The wide scope's full-text probe (store/retrieval.py): which lexemes it reads."""

from __future__ import annotations

from service.store.retrieval import probe_query, tsquery_term

MAX = 0.002


def test_rare_lexemes_are_ored_and_lone_common_ones_left_out() -> None:
    assert probe_query(["carolin", "adopt", "agenc"], {"carolin": 0.2}, MAX) == "'adopt' | 'agenc'"


def test_two_common_lexemes_are_read_together_when_rare_together() -> None:
    common = {"carolin": 0.2, "support": 0.005, "go": 0.1}
    # support x go = 0.0005 and support x carolin = 0.001 are below MAX; go x carolin is not.
    assert probe_query(["go", "carolin", "support", "lgbtq"], common, MAX) == (
        "'lgbtq' | ('support' & 'go') | ('support' & 'carolin')"
    )


def test_a_goal_of_very_common_lexemes_reads_the_memories_holding_its_rarest() -> None:
    common = {"carolin": 0.2, "melani": 0.1, "go": 0.3, "say": 0.25}
    assert probe_query(["melani", "carolin", "go", "say", "melani"], common, MAX) == (
        "'melani' & 'carolin' & 'say'"
    )


def test_no_lexeme_gives_an_empty_probe() -> None:
    assert probe_query([], {"carolin": 0.2}, MAX) == ""


def test_quotes_and_backslashes_are_doubled() -> None:
    assert tsquery_term("o'neil\\x") == "'o''neil\\\\x'"
