"""Memory types, the facet each belongs to, and the intents that shape a pack.

A memory's ``type`` says what it is (a decision, a gotcha...); its facet is the section of a
context pack it lands in. The intent decides which facets come first and get more room.
"""

from __future__ import annotations

from typing import get_args

from service.schemas.memories import MemoryType

# The types are declared once, as the request schema's Literal.
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
DEFAULT_TYPE = "episode"

FACETS: tuple[str, ...] = (
    "active_work",
    "artifacts",
    "constraints",
    "decisions",
    "domain",
    "gotchas",
    "ideation",
    "planning",
    "preferences",
    "procedures",
    "recent_memory",
    "verification",
)

FACET_OF_TYPE: dict[str, str] = {
    "task": "active_work",
    "plan": "planning",
    "decision": "decisions",
    "idea": "ideation",
    "claim": "domain",
    "domain": "domain",
    "constraint": "constraints",
    "rule": "constraints",
    "artifact": "artifacts",
    "procedure": "procedures",
    "pattern": "procedures",
    "gotcha": "gotchas",
    "verification": "verification",
    "session": "recent_memory",
    "episode": "recent_memory",
}

FACET_TITLES: dict[str, str] = {
    "active_work": "Active work",
    "artifacts": "Artifacts",
    "constraints": "Constraints",
    "decisions": "Decisions",
    "domain": "Domain knowledge",
    "gotchas": "Gotchas",
    "ideation": "Ideas",
    "planning": "Planning",
    "preferences": "User preferences",
    "procedures": "Procedures",
    "recent_memory": "Recent memory",
    "verification": "Verification",
}

INTENTS: tuple[str, ...] = ("build", "plan", "ideate", "research", "debug", "decide", "learn", "general")
DEFAULT_INTENT = "build"

# Facets an intent puts first, in order; the rest follow by score. `general`: by score only.
INTENT_FACETS: dict[str, tuple[str, ...]] = {
    "build": ("active_work", "decisions", "constraints", "procedures", "gotchas", "artifacts"),
    "debug": ("gotchas", "verification", "procedures", "recent_memory"),
    "plan": ("planning", "decisions", "constraints"),
    "ideate": ("ideation", "domain"),
    "research": ("domain", "artifacts", "decisions"),
    "learn": ("domain", "artifacts", "decisions"),
    "decide": ("decisions", "constraints", "ideation"),
    "general": (),
}

LAYERS: tuple[str, ...] = ("recall", "wake", "deep_search")
DEFAULT_LAYER = "recall"
# The sections of a wake pack, in the order they fill and show (domain/wake.py): what is in
# flight, the rules that bind, the decisions that stand, gotchas, procedures, the user's
# lasting preferences, the most recent work. "preferences" exists only in wake packs.
WAKE_FACETS: tuple[str, ...] = (
    "active_work",
    "constraints",
    "decisions",
    "gotchas",
    "procedures",
    "preferences",
    "recent_memory",
)


def facet_of(memory_type: str) -> str:
    """The facet a memory of ``memory_type`` belongs to."""
    return FACET_OF_TYPE.get(memory_type, "recent_memory")
