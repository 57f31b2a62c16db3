"""service/domain/goal_focus.py: a dialogue goal searches with its recent turns, without
filler, speaker labels or every word of the chat; a one-line goal is left as it is."""

from __future__ import annotations

from service.domain.goal_focus import MAX_LEXICAL_TERMS, focus_goal, turns_of

DIALOGUE = (
    "Casey: hey! long time no see\n"
    "Maya: I know, it's been a crazy few weeks.\n"
    "Casey: did the paint job in the kitchen ever get finished?\n"
    "Maya: yes, all good on that front, thanks.\n"
    "Casey: and how is Biscuit doing? settling in okay?"
)


def test_a_one_line_goal_is_searched_as_asked() -> None:
    goal = "Why did we go with Kafka instead of NATS for the billing service event bus?"
    focused = focus_goal(goal)
    assert focused.lexical == focused.vector == goal
    assert focused.turns == 1


def test_the_vector_reads_the_last_turns_only() -> None:
    focused = focus_goal(DIALOGUE)
    assert focused.turns == 5
    assert focused.vector == (
        "Maya: yes, all good on that front, thanks.\n"
        "Casey: and how is Biscuit doing? settling in okay?"
    )
    assert focus_goal(DIALOGUE, vector_turns=1).vector.startswith("Casey: and how is Biscuit")


def test_the_lexical_text_starts_with_the_newest_turn_and_drops_filler_and_labels() -> None:
    words = focus_goal(DIALOGUE).lexical.split()
    assert words[:2] == ["Biscuit", "settling"]
    assert "kitchen" in words  # older turns fill the room the recent ones leave
    for noise in ("Casey", "Maya", "hey", "okay", "thanks", "how", "it's"):
        assert noise not in words


def test_the_lexical_text_is_capped_and_older_turns_lose_first() -> None:
    old = "Alex: " + " ".join(f"oldword{i}" for i in range(40))
    new = "Sam: what about the glacier lagoon hike in Reykjavik?"
    words = focus_goal(f"{old}\n{new}", max_terms=6).lexical.split()
    assert words == ["glacier", "lagoon", "hike", "Reykjavik", "oldword0", "oldword1"]
    long_chat = "\n".join(f"A: topic{i} detail{i}" for i in range(50))
    assert len(focus_goal(long_chat).lexical.split()) == MAX_LEXICAL_TERMS


def test_a_chat_of_greetings_still_searches_with_its_last_turns() -> None:
    focused = focus_goal("A: hey!\nB: hi, thanks")
    assert focused.lexical == focused.vector == "A: hey!\nB: hi, thanks"


def test_turns_are_the_non_blank_lines() -> None:
    assert turns_of("  a \n\n b\n") == ["a", "b"]
    assert focus_goal("   ").lexical == ""
