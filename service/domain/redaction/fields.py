"""One redaction pass over every field a write stores or echoes.

``redact_fields`` is the single entry point the write paths call (remember, batch, PATCH,
artifacts; the seams pipeline validate -> redact -> gate -> hash calls it as its "redact"
step). It applies :class:`~service.domain.redaction.engine.Redactor` to

* text fields (content, name, source, url, domain, origin, summary, the goal...): as text;
* lists of strings (tags): each element;
* JSON objects (metadata, an artifact body): keys *and* values at any depth, scalars under
  a secret-named key replaced whatever their nesting (see ``Redactor.redact_json``).

Identifier fields (project, agent_id, relationship labels) are not rewritten: they scope and
filter reads, and ``[API_KEY:REDACTED]`` as a project id would merge unrelated memories. A
secret in one is refused instead, with a 422 naming the field and the label, never the
value, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from service.domain.redaction.engine import REDACTOR, JSONValue, merge_counts
from service.errors import InvalidInput

__all__ = ["check_identifiers", "redact_fields"]



def redact_fields(fields: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """Redact every value of ``fields``.

    Args:
        fields: Field name -> value: ``str``, ``list``/``tuple`` of strings, a JSON object
            or list, or None (kept as None). Other scalars are kept as they are.

    Returns:
        The redacted values under the same names, and the replacements per label summed
        over all fields.
    """
    out: dict[str, Any] = {}
    counts: list[dict[str, int]] = []
    for name, value in fields.items():
        if value is None:
            out[name] = None
        elif isinstance(value, str):
            result = REDACTOR.redact(value)
            out[name] = result.text
            counts.append(result.counts)
        else:
            redacted, found = REDACTOR.redact_json(_as_json(value))
            out[name] = redacted
            counts.append(found)
    return out, merge_counts(*counts)


def check_identifiers(identifiers: Mapping[str, str | None]) -> None:
    """Refuse identifiers that hold a secret.

    Args:
        identifiers: Field path (``project``, ``items.3.agent_id``,
            ``related.0.relationship``) -> value; None values are skipped.

    Raises:
        InvalidInput: 422 naming the first field that holds a secret and its label.
    """
    for name, value in identifiers.items():
        if not value:
            continue
        try:
            _check_clean(value)
        except _HoldsSecret as found:
            raise InvalidInput(
                name,
                f"{name} looks like a secret ({found.labels}); identifiers are not redacted, "
                "so it was refused and nothing was stored",
            ) from None


class _HoldsSecret(Exception):
    """An identifier in which the redactor found something: its labels, comma-separated."""

    def __init__(self, labels: str) -> None:
        super().__init__(labels)
        self.labels = labels


@lru_cache(maxsize=4096)
def _check_clean(value: str) -> None:
    """Raises ``_HoldsSecret`` when the redactor finds anything in ``value``. A batch names
    its few namespaces and projects hundreds of times, so a clean one is checked once; a
    call that raises is never remembered, so neither is an identifier holding a secret."""
    found = REDACTOR.redact(value).counts
    if found:
        raise _HoldsSecret(", ".join(sorted(found)))


def _as_json(value: Any) -> JSONValue:
    if isinstance(value, tuple):
        return list(value)
    return value  # type: ignore[no-any-return]
