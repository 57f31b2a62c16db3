"""What a long, multi-turn goal asks: the recent turns, not every word of the chat.

An agent often passes the last few turns of a dialogue as its goal. Taken whole, such a goal
is a bag of every word said (greetings, a topic the chat has left, the speakers' names), and
the embedder reads only its first 256 tokens: the oldest turns, the least relevant ones.

``focus_goal`` splits a goal into turns (its non-blank lines) and, when there is more than
one, gives the two retrievers what the chat is about now:

- the vector text: the last ``VECTOR_TURNS`` turns, speaker labels kept (the embedder reads
  them as a sentence);
- the lexical text: content words from the newest turn back, speaker labels and filler
  (greetings, acknowledgements, chat words such as "yeah" or "thanks") left out, at most
  ``MAX_LEXICAL_TERMS`` distinct words, so older turns only fill what the recent ones
  leave free.

A goal of one line (a question, a task) is left as it is, whatever its length: its words
are all the asker's, and BM25's idf already weighs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Turns of a dialogue goal the vector reads (the newest ones).
VECTOR_TURNS = 2
# Distinct content words a dialogue goal gives full-text search, newest turns first.
MAX_LEXICAL_TERMS = 8

# "Name:" or "Name Surname:" at a turn's start (a speaker label, not content).
_SPEAKER = re.compile(r"^\s*[\w][\w .'\-]{0,40}:\s+")
_WORD = re.compile(r"[\w][\w'\-]*")
# Postgres' English stop words (snowball's list): full-text search drops them, so they
# must not take the place of a content word under the cap.
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now
    """.split()
)
# Words that carry the chat, not its subject.
FILLER = frozenset(
    """
    hey hi hello hiya yo bye goodbye thanks thank thx ok okay yeah yes yep yup nope no
    oh ah wow haha lol hmm um uh well sure cool nice great good fine awesome amazing
    really just actually anyway anyways totally guess think know mean like got get
    gonna wanna kinda sorta please sorry glad happy see long time minute chat talk soon
    """.split()
)


@dataclass(frozen=True)
class FocusedGoal:
    """The texts each retriever searches with."""

    lexical: str
    vector: str
    turns: int


def turns_of(goal: str) -> list[str]:
    """The goal's turns: its non-blank lines, stripped."""
    return [line.strip() for line in goal.splitlines() if line.strip()]


def focus_goal(
    goal: str, *, vector_turns: int = VECTOR_TURNS, max_terms: int = MAX_LEXICAL_TERMS
) -> FocusedGoal:
    """The lexical and vector texts of ``goal`` (see the module docstring).

    Args:
        goal: the goal as asked (whitespace within a line is kept).
        vector_turns: how many of the newest turns the vector text holds.
        max_terms: at most this many distinct content words in the lexical text.

    Returns:
        ``FocusedGoal``: for a one-line goal both texts are the goal itself.
    """
    turns = turns_of(goal)
    if len(turns) < 2:
        text = " ".join(turns)
        return FocusedGoal(lexical=text, vector=text, turns=len(turns))
    vector = "\n".join(turns[-vector_turns:])
    words: list[str] = []
    seen: set[str] = set()
    for turn in reversed(turns):
        picked: list[str] = []
        for word in _WORD.findall(_SPEAKER.sub("", turn, count=1)):
            low = word.casefold()
            if low.split("'")[0] in STOP_WORDS:  # "you're", "it's": stop words to Postgres
                continue
            if low in FILLER or low in STOP_WORDS or low in seen or len(low) < 2:
                continue
            seen.add(low)
            picked.append(word)
        room = max_terms - len(words)
        words.extend(picked[:room])
        if len(words) >= max_terms:
            break
    # A chat of greetings only: its last turns are all there is to search with.
    lexical = " ".join(words) if words else vector
    return FocusedGoal(lexical=lexical, vector=vector, turns=len(turns))
