"""The namespace grammar: ``user[:session[:task]]``, as every request model checks it.

This is the shape only. What a namespace may not hold (a secret: it is an identifier,
refused rather than rewritten) and what a call at a namespace reaches are rules of the
domain (``domain/namespaces.py``), which checks the grammar through this module.
"""

from __future__ import annotations

import re

from service.errors import InvalidInput

SEGMENT = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
MAX_DEPTH = 3
SUBTREE = "*"


def check_grammar(value: str, field: str = "namespace") -> str:
    """Validate ``value`` as ``user[:session[:task]]`` and return it unchanged.

    Raises:
        InvalidInput: naming ``field``, when a segment is empty, too long, has characters
            outside ``[A-Za-z0-9_.-]``, or there are more than three segments.
    """
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "namespace is required: user[:session[:task]]")
    parts = value.split(":")
    if len(parts) > MAX_DEPTH:
        raise InvalidInput(
            field, f"namespace has {len(parts)} segments; at most 3 (user[:session[:task]])"
        )
    for part in parts:
        if not SEGMENT.fullmatch(part):
            raise InvalidInput(
                field,
                "each namespace segment must be 1-64 characters of [A-Za-z0-9_.-] "
                "(no empty segments, no leading or trailing colon)",
            )
    return value


def namespace_field(value: str) -> str:
    """A request model's ``namespace`` validator: the grammar, as a pydantic ``ValueError``
    (the 422 of a malformed body names the field and carries this message)."""
    try:
        return check_grammar(value)
    except InvalidInput as exc:
        raise ValueError(exc.message) from None
