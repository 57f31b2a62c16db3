"""``bench.scope_recall``'s scoring: which questions count at a scope, and where a pack
finds a gold turn."""

from __future__ import annotations

from bench.scope_recall import counted, found_at, gold_texts
from service.domain.namespaces import ancestors


def test_a_task_reads_its_session_and_its_user() -> None:
    """The scope the tool reads its texts from is the namespace and its ancestors."""
    assert ancestors("big-u0:s1:t1") == ["big-u0", "big-u0:s1", "big-u0:s1:t1"]
    assert ancestors("solo") == ["solo"]


def test_only_questions_whose_gold_turn_the_scope_holds_count() -> None:
    texts = gold_texts(
        [
            {"id": "c:D1:1", "speaker": "Ann", "text": "I moved to Lyon."},
            {"id": "c:D1:2", "speaker": "Bo", "text": "Nice!"},
        ]
    )
    questions = [
        {"query": "Where did Ann move?", "gold_ids": ["c:D1:1"]},
        {"query": "What did Bo say?", "gold_ids": ["c:D1:2"]},
        {"query": "Unknown evidence", "gold_ids": ["c:D9:9"]},
    ]
    got = counted(questions, texts, in_scope={"Ann: I moved to Lyon."})
    assert got == [("Where did Ann move?", {"Ann: I moved to Lyon."})]


def test_a_pack_finds_the_first_copy_of_any_gold_turn() -> None:
    gold = {"Ann: I moved to Lyon.", "Ann: Lyon is home now."}
    assert found_at(["x", "Ann: Lyon is home now.", "Ann: I moved to Lyon."], gold) == 2
    assert found_at(["x", "y"], gold) is None
    assert found_at([], gold) is None
