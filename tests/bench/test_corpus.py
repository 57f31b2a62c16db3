"""bench/corpus.py: the synthetic speed corpus is deterministic, distinct and per user."""

from __future__ import annotations

from bench.corpus import PER_USER, corpus_for, extra_items, goals, user_ns

LOCOMO = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful."]


def test_the_corpus_is_deterministic_and_every_text_distinct() -> None:
    a = corpus_for(range(3), 7, LOCOMO)
    assert a == corpus_for(range(3), 7, LOCOMO)
    assert len(a) == 3 * PER_USER
    assert len({text for *_, text in a}) == len(a)
    assert {ns for ns, *_ in a} == {user_ns(0), user_ns(1), user_ns(2)}


def test_a_later_range_of_users_is_the_same_text_as_in_a_bigger_range() -> None:
    # Growing the store by users adds rows; it never changes the ones already seeded.
    assert corpus_for(range(1, 2), 7, LOCOMO) == corpus_for(range(2), 7, LOCOMO)[PER_USER:]


def test_extra_items_and_goals_stay_within_the_seeded_users() -> None:
    extra = extra_items("single", 50, 4, 7, LOCOMO, 400)
    seeded = {text for *_, text in corpus_for(range(4), 7, LOCOMO)}
    assert all(ns in {user_ns(u) for u in range(4)} for ns, *_ in extra)
    assert not seeded & {text for *_, text in extra}
    assert {ns for ns, _ in goals(40, 4, 7)} <= {user_ns(u) for u in range(4)}


def test_extra_items_are_the_same_for_one_mark_and_new_for_another() -> None:
    # The mark is what the store holds before the writes: a later run against a kept store
    # (which the earlier run's writes grew) draws texts and item ids none of that run's.
    first = extra_items("batch", 30, 4, 7, LOCOMO, 400)
    assert first == extra_items("batch", 30, 4, 7, LOCOMO, 400)
    assert len({text for *_, text in first}) == 30
    later = extra_items("batch", 30, 4, 7, LOCOMO, 430)
    assert not {text for *_, text in first} & {text for *_, text in later}
    assert not {iid for _, iid, *_ in first} & {iid for _, iid, *_ in later}
