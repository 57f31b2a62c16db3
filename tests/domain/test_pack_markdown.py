"""service/domain/pack_markdown.py: the markdown budget. The pack never exceeds its token
budget; the lowest-scored items go first and the note says how many were left out."""

from __future__ import annotations

import uuid

from service.domain.pack_markdown import fit_empty, render_empty, render_pack
from service.schemas.context import ContextItem, ContextQuality, ContextSection


def words(text: str) -> int:
    return len(text.split())


def _item(name: str, score: float, content: str, facet: str = "decisions") -> ContextItem:
    return ContextItem(
        id=uuid.uuid4(),
        type="decision",
        name=name,
        content=content,
        score=score,
        facet=facet,
        reason="matched",
        source=None,
        namespace="u",
        quality=ContextQuality(
            origin=None,
            source=None,
            url=None,
            created_at=None,
            updated_at=None,
            valid_at=None,
            project_id=None,
        ),
        metadata={},
    )


def _sections() -> list[ContextSection]:
    items = [
        _item("high", 0.9, "the high scoring memory about token rotation " * 3),
        _item("mid", 0.5, "a middling memory about the login service " * 3),
        _item("low", 0.1, "a low scoring memory about unrelated deploys " * 3),
    ]
    return [ContextSection(facet="decisions", title="Decisions", items=items)]


def test_a_pack_within_budget_is_whole() -> None:
    rendered = render_pack("rotate tokens", "build", "recall", _sections(), 10_000, words)
    assert rendered.omitted == 0
    assert all(n in rendered.markdown for n in ("high", "mid", "low"))
    assert rendered.tokens == words(rendered.markdown)


def test_the_lowest_scored_items_go_first() -> None:
    whole = render_pack("rotate tokens", "build", "recall", _sections(), 10_000, words)
    budget = whole.tokens - 10
    rendered = render_pack("rotate tokens", "build", "recall", _sections(), budget, words)
    assert rendered.tokens <= budget
    assert rendered.omitted >= 1
    assert "high" in rendered.markdown and "low scoring" not in rendered.markdown


def test_no_budget_is_ever_exceeded() -> None:
    for budget in (0, 1, 5, 12, 20, 40, 80):
        rendered = render_pack("rotate tokens", "build", "recall", _sections(), budget, words)
        assert rendered.tokens <= budget
        assert rendered.tokens == (words(rendered.markdown) if rendered.markdown else 0)


def test_the_empty_pack_fits_too() -> None:
    text = render_empty("rotate tokens", "build", "recall", 7)
    assert "7" in text
    assert fit_empty(text, 10_000, words).markdown == text
    assert fit_empty(text, 3, words).tokens <= 3
