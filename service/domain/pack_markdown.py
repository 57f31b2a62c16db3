"""The markdown view of a context pack, fitted to a token budget.

The view is for prompt injection, so it carries what a model can act on and nothing that
changes between two calls over the same store (no scores, no timestamps, no audit id): a
wake pack renders to the same bytes every time, and prompt caches survive.

Budget: tokens are counted with the embedder's tokenizer. Items are left out lowest score
first (a wake pack: last picked first, so a trimmed wake pack holds what a smaller limit
would) until the text fits; when even the best item alone does not fit, its content is cut.
The result never exceeds the budget (the final text is counted, not estimated).

A wake pack without a goal is headed "Wake pack: where things stand".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
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
    # Items shown with their content cut to fit (0 or 1).
    cut: int = 0


def count_noun(n: int, singular: str, plural: str | None = None) -> str:
    """``1 item``, ``2 items``, ``0 items``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _title(goal: str | None) -> str:
    return f"Context for: {_one_line(goal)}" if goal else "Wake pack: where things stand"


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


def _header(goal: str | None, intent: str, layer: str, shown: int, total: int) -> str:
    noun = "item" if total == 1 else "items"
    count = f"{total} {noun}" if shown == total else f"{shown} of {total} {noun}"
    return f"# {_title(goal)}\nintent: {intent} · layer: {layer} · {count}\n"


def _note(omitted: int) -> str:
    return (
        f"\n_{omitted} lower-ranked item{'s' if omitted != 1 else ''} left out to fit the "
        "token budget; all are in the JSON sections._\n"
    )


def _assemble(
    goal: str | None,
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


def render_empty_wake(goal: str | None, intent: str, in_scope: int) -> str:
    """An empty wake pack: the scope holds nothing, or nothing that belongs in a wake pack."""
    why = (
        "Nothing is stored in this namespace or its ancestors yet."
        if not in_scope
        else f"{count_noun(in_scope, 'memory', 'memories')} in scope, none of them wake "
        "material (superseded, finished, or kinds a wake pack leaves out)."
    )
    return f"# {_title(goal)}\nintent: {intent} · layer: wake · 0 items\n\n{why}\n"


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
    goal: str | None,
    intent: str,
    layer: str,
    sections: list[ContextSection],
    budget: int,
    count: TokenCounter,
    ranked: Sequence[uuid.UUID] | None = None,
) -> RenderedPack:
    """Render ``sections`` within ``budget`` tokens, leaving out the lowest-ranked items
    first.

    Args:
        goal, intent, layer: shown in the header (no goal: the wake pack's title).
        sections: in display order; their items carry the scores that decide what goes.
        budget: the most tokens the markdown may take.
        count: the tokenizer's count (``embedder.count_tokens``).
        ranked: item ids best first, when the order is not the scores' (wake packs).

    Returns:
        The markdown, its token count, how many items it leaves out and how many it cuts.
    """
    flat = [item for section in sections for item in section.items]
    total = len(flat)
    if ranked is not None:
        position = {item_id: n for n, item_id in enumerate(ranked)}
        by_rank = sorted(range(total), key=lambda i: (position.get(flat[i].id, total), i))
    else:
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
    return RenderedPack(
        markdown=text,
        tokens=tokens,
        omitted=total - len(keep),
        cut=sum(1 for i in keep if cut.get(i)),
    )


def fit_empty(text: str, budget: int, count: TokenCounter) -> RenderedPack:
    """The empty pack's markdown within ``budget``."""
    tokens = count(text)
    if tokens > budget:
        text = _fit_header(text.split("\n", 1)[0], budget, count)
        tokens = count(text) if text else 0
    return RenderedPack(markdown=text, tokens=tokens, omitted=0)
