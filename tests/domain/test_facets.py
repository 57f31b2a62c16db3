"""service/domain/facets.py: every type has a facet, every intent orders known facets."""

from __future__ import annotations

from service.domain.facets import (
    DEFAULT_INTENT,
    DEFAULT_LAYER,
    DEFAULT_TYPE,
    FACET_OF_TYPE,
    FACETS,
    INTENT_FACETS,
    INTENTS,
    LAYERS,
    MEMORY_TYPES,
    WAKE_FACETS,
    facet_of,
)


def test_every_type_lands_in_a_known_facet() -> None:
    assert set(MEMORY_TYPES) <= set(FACET_OF_TYPE) | {DEFAULT_TYPE}
    assert {facet_of(t) for t in MEMORY_TYPES} <= set(FACETS)


def test_an_unknown_type_is_recent_memory() -> None:
    assert facet_of("no-such-type") == "recent_memory"


def test_known_types_map_as_declared() -> None:
    assert facet_of("decision") == "decisions"
    assert facet_of("task") == "active_work"


def test_intents_order_known_facets_without_repeats() -> None:
    assert set(INTENT_FACETS) == set(INTENTS)
    for facets in INTENT_FACETS.values():
        assert set(facets) <= set(FACETS)
        assert len(set(facets)) == len(facets)
    assert INTENT_FACETS["general"] == ()


def test_defaults_are_members() -> None:
    assert DEFAULT_INTENT in INTENTS
    assert DEFAULT_LAYER in LAYERS
    assert DEFAULT_TYPE in MEMORY_TYPES
    assert set(WAKE_FACETS) <= set(FACETS)
