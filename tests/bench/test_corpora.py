"""bench/corpora: the committed corpora are what their generators write (same seed, same
bytes), and every goal's gold memories exist in its own group."""

from __future__ import annotations

import pytest

from bench import corpora
from bench.corpora import agent, personal


@pytest.mark.parametrize("module", [agent, personal])
def test_the_committed_corpus_is_the_generators(module: object, tmp_path: object) -> None:
    name = module.__name__.rsplit(".", 1)[1]  # type: ignore[attr-defined]
    made = module.generate()  # type: ignore[attr-defined]
    committed = corpora.read(name)
    assert committed["memories"] == made["memories"]
    assert committed["queries"] == made["queries"]


@pytest.mark.parametrize("name", ["agent", "personal"])
def test_gold_memories_exist_in_the_goals_group(name: str) -> None:
    data = corpora.read(name)
    group_of = {m["id"]: m["group"] for m in data["memories"]}
    assert len({m["group"] for m in data["memories"]}) >= 9  # three folds of three or more
    assert len(group_of) == len(data["memories"])
    for q in data["queries"]:
        assert q["gold_ids"]
        assert all(group_of[g] == q["group"] for g in q["gold_ids"])


def test_personal_goals_are_dialogues_and_agent_goals_are_one_line() -> None:
    assert all(q["query"].count("\n") >= 2 for q in corpora.read("personal")["queries"])
    assert all("\n" not in q["query"] for q in corpora.read("agent")["queries"])
