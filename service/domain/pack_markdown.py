"""The markdown view of a context pack, fitted to a token budget.

The view is for prompt injection, so it carries what a model can act on and nothing that
changes between two calls over the same store (no scores, no timestamps, no audit id): a
wake pack renders to the same bytes every time, and prompt caches survive.

Budget: tokens are counted with the embedder's tokenizer. Items are left out lowest score
first until the text fits; when even the best item alone does not fit, its content is cut.
The result never exceeds the budget (the final text is counted, not estimated).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.domain.facets import FACET_TITLES
from service.schemas.context import ContextItem, ContextSection

TokenCounter = Callable[[str], int]

# Below this many tokens for its content, a cut item says too little to be worth showing.
MIN_CUT_TOKENS = 12
ELLIPSIS = " …"


@dataclass(frozen=True)
class RenderedPack:
    markdown: str
    tokens: int
    omitted: int


def _one_line(text: str) -> str:
    return " ".join(text.split())


def item_line(item: ContextItem, content: str | None = None) -> str:
    """One item as a markdown bullet (its related neighbours on an indented line)."""
    body = _one_line(item.content if content is None else content)
    name = _one_line(item.name)
    if item.type == "artifact" and "artifact_id" in item.metadata:
        artifact_id = item.metadata["artifact_id"]
        keys = item.metadata.get("schema_keys") or []
        keys_text = f" Fields: {', '.join(str(k) for k in keys[:20])}." if keys else ""
        line = (
            f"- **{name}** (artifact {artifact_id}): {body}{keys_text} "
            f"Fetch only the fields you need: GET /v1/artifacts/{artifact_id}?fields=..."
        )
    elif name and body.startswith(name.rstrip("…").rstrip()):
        line = f"- ({item.type}) {body}"
    else:
        line = f"- **{name}** ({item.type}): {body}"
    if item.related:
        links = "; ".join(
            f"{r.relationship} {'→' if r.direction == 'outgoing' else '←'} {_one_line(r.name)}"
            for r in item.related
        )
        line += f"\n  related: {links}"
    return line


def _header(goal: str, intent: str, layer: str, shown: int, total: int) -> str:
    noun = "item" if total == 1 else "items"
    count = f"{total} {noun}" if shown == total else f"{shown} of {total} {noun}"
    return f"# Context for: {_one_line(goal)}\nintent: {intent} · layer: {layer} · {count}\n"


def _note(omitted: int) -> str:
    return (
        f"\n_{omitted} lower-ranked item{'s' if omitted != 1 else ''} left out to fit the "
        "token budget; all are in the JSON sections._\n"
    )


def _assemble(
    goal: str,
    intent: str,
    layer: str,
    sections: list[ContextSection],
    keep: set[int],
    total: int,
    cut: dict[int, str],
) -> str:
    """The markdown of the kept items (``keep``: indexes in section order)."""
    parts: list[str] = []
    index = 0
    shown = 0
    for section in sections:
        lines: list[str] = []
        for item in section.items:
            if index in keep:
                lines.append(item_line(item, cut.get(index)))
            index += 1
        if lines:
            shown += len(lines)
            parts.append(f"\n## {FACET_TITLES.get(section.facet, section.title)}\n")
            parts.append("\n".join(lines) + "\n")
    text = _header(goal, intent, layer, shown, total) + "".join(parts)
    if shown < total:
        text += _note(total - shown)
    return text


def render_empty(goal: str, intent: str, layer: str, gated_out: int) -> str:
    why = (
        f"{gated_out} candidate{'s' if gated_out != 1 else ''} fell below the relevance floor"
        if gated_out
        else "this scope holds no memory that matches"
    )
    return (
        f"# Context for: {_one_line(goal)}\nintent: {intent} · layer: {layer} · 0 items\n\n"
        f"No stored memory is relevant to this goal ({why}).\n"
    )


def _fit_header(text: str, budget: int, count: TokenCounter) -> str:
    """The longest prefix of ``text``, cut at a word, that fits ``budget`` ("" if none)."""
    if count(text) <= budget:
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + ELLIPSIS) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return (" ".join(words[:lo]) + ELLIPSIS) if lo else ""


def _cut_content(content: str, max_tokens: int, count: TokenCounter) -> str:
    words = _one_line(content).split(" ")
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid]) + ELLIPSIS) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + ELLIPSIS


def render_pack(
    goal: str,
    intent: str,
    layer: str,
    sections: list[ContextSection],
    budget: int,
    count: TokenCounter,
) -> RenderedPack:
    """Render ``sections`` within ``budget`` tokens, leaving out the lowest-scored items
    first.

    Args:
        goal, intent, layer: shown in the header.
        sections: in display order; their items carry the scores that decide what goes.
        budget: the most tokens the markdown may take.
        count: the tokenizer's count (``embedder.count_tokens``).

    Returns:
        The markdown, its token count and how many items it leaves out.
    """
    flat = [item for section in sections for item in section.items]
    total = len(flat)
    # Lowest score goes first; ties: the later in display order goes first.
    by_rank = sorted(range(total), key=lambda i: (-flat[i].score, i))
    keep = set(range(total))
    cut: dict[int, str] = {}
    whole = _assemble(goal, intent, layer, sections, keep, total, cut)
    tokens = count(whole)
    if tokens <= budget:  # the usual case: one count
        return RenderedPack(markdown=whole, tokens=tokens, omitted=0)
    # Estimate per-item cost once; drop until the estimate fits, then check the real text.
    cost = {i: count(item_line(flat[i])) for i in range(total)}
    fixed = count(_header(goal, intent, layer, total, total)) + 8 * len(sections)
    estimate = fixed + sum(cost.values())
    note_cost = count(_note(total))
    drop_order = list(reversed(by_rank))
    while keep and estimate > budget:
        victim = drop_order.pop(0)
        keep.discard(victim)
        estimate -= cost[victim]
        if len(keep) == total - 1:
            estimate += note_cost
    text = _assemble(goal, intent, layer, sections, keep, total, cut)
    tokens = count(text)
    while keep and tokens > budget:
        victim = drop_order.pop(0)
        keep.discard(victim)
        text = _assemble(goal, intent, layer, sections, keep, total, cut)
        tokens = count(text)
    if not keep and total:
        # Not even the best item fits whole: show as much of it as fits.
        best = by_rank[0]
        keep = {best}
        cut[best] = ""
        overhead = count(_assemble(goal, intent, layer, sections, keep, total, cut))
        room = budget - overhead
        if room >= MIN_CUT_TOKENS:
            cut[best] = _cut_content(flat[best].content, room, count)
            text = _assemble(goal, intent, layer, sections, keep, total, cut)
            tokens = count(text)
        if room < MIN_CUT_TOKENS or tokens > budget:
            keep, cut = set(), {}
            text = _assemble(goal, intent, layer, sections, keep, total, cut)
            tokens = count(text)
    if tokens > budget:
        text = _fit_header(text.split("\n", 1)[0], budget, count)
        tokens = count(text) if text else 0
    return RenderedPack(markdown=text, tokens=tokens, omitted=total - len(keep))


def fit_empty(text: str, budget: int, count: TokenCounter) -> RenderedPack:
    """The empty pack's markdown within ``budget``."""
    tokens = count(text)
    if tokens > budget:
        text = _fit_header(text.split("\n", 1)[0], budget, count)
        tokens = count(text) if text else 0
    return RenderedPack(markdown=text, tokens=tokens, omitted=0)
