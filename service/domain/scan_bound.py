"""The bound on text work per call: at most ``max_scanned_bytes`` of caller-supplied text is
redacted, parsed, tokenized or trimmed by one call; above it, 413 ``payload_too_large`` naming
the field, before any of that work starts and before anything is written.

Why: the redactor's worst case is about a second of CPU per MB (``bench/redaction_cost.py``)
and tokenizing and trimming add to it, while the request body limit (``max_body_bytes``, 4 MiB)
only bounds what is read off the socket. The MCP stdio face has no body limit at all.

**The rule.** A call lists what it will scan as ``(field path, value)`` parts and calls
``check_scan_bound`` first, in the worker thread that then does the work (measuring a JSON
value is itself CPU work):

* **Size**: a text in UTF-8 bytes; any other JSON value (an artifact's body, a tool result
  that is an object, metadata) as compact JSON (``compact_size``: no spaces, UTF-8 as is);
  None is 0. A text that holds JSON counts as the text it was sent as.
* **Total**: the parts of one call are summed, identifiers checked for secrets included: a
  batch's items together, an assemble call's system prompt, user message, messages (content,
  tool-call ids, names, arguments) and tool results together (and the task state it
  resolves, checked again once read: stored artifacts are text the call will scan too).
* **Field named**: the largest part when it alone is over the limit (``tool_results.0.result``,
  ``items.3.content``, ``body``); otherwise the top-level field holding the most of the total
  (``items``, ``messages``, ``tool_results``).

Callers: remember's batch (``domain/remember.py:remember_batch``), the artifact body
(``domain/artifacts.py:store_artifact``), the tool-result envelope
(``domain/tool_results.py:envelope_call``) and assembly (``domain/assemble.py:assemble``),
whatever face they are called through (HTTP, MCP, console). A single remember or PATCH is
bounded more tightly by the gate's ``max_chars`` (content over it is refused before any scan)
and ``max_metadata_bytes``; a context goal by its schema (4,000 characters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from service.errors import PayloadTooLarge

Part = tuple[str, Any]
"""One thing a call will scan: its field path (``messages.2.content``) and its value."""


def compact_size(value: Any) -> int:
    """``value`` as compact JSON, in UTF-8 bytes (an artifact's stored ``size_bytes``)."""
    return len(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode()
    )


def scanned_size(value: Any) -> int:
    """The bytes of ``value`` the bound counts: a text's UTF-8 bytes, any other JSON value's
    compact JSON, 0 for None."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    return compact_size(value)


def check_scan_bound(parts: Iterable[Part], limit: int, hint: str) -> None:
    """413 when the parts one call will scan come to more than ``limit`` bytes.

    Args:
        parts: ``(field path, value)`` of everything the call will redact or tokenize.
        limit: ``settings.max_scanned_bytes``.
        hint: how the caller stays under it (``split the batch``).

    Raises:
        PayloadTooLarge: over the limit; ``field`` names the largest part when it alone is
            over, else the top-level field holding the most bytes.
    """
    sizes: dict[str, int] = {}
    for path, value in parts:
        size = scanned_size(value)
        if size:
            sizes[path] = sizes.get(path, 0) + size
    total = sum(sizes.values())
    if total <= limit:
        return
    largest = max(sizes, key=lambda p: sizes[p])
    if sizes[largest] > limit:
        raise PayloadTooLarge(
            f"{largest}: {sizes[largest]} bytes of text to scan; at most {limit} per call "
            f"({hint})",
            field=largest,
        )
    groups: dict[str, int] = {}
    for path, size in sizes.items():
        top = path.split(".", 1)[0]
        groups[top] = groups.get(top, 0) + size
    field = max(groups, key=lambda g: groups[g])
    raise PayloadTooLarge(
        f"{field}: {total} bytes of text to scan in all ({groups[field]} in {field}); at most "
        f"{limit} per call ({hint})",
        field=field,
    )
