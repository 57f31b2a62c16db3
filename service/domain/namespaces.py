"""Namespaces: ``user[:session[:task]]``.

A call at ``u:s:t`` sees its own memories and its ancestors' (``u``, ``u:s``), never a sibling
task (``u:s:t2``) or another session (``u:s2``). Keys may be limited to namespace prefixes;
a prefix ``u:s`` covers ``u:s`` and everything under it, and nothing above it.
"""

from __future__ import annotations

from service.domain.redaction.fields import check_identifiers
from service.schemas.namespaces import SUBTREE, check_grammar


def parse_namespace(value: str, field: str = "namespace", *, refuse_secrets: bool = True) -> str:
    """Validate ``value`` as ``user[:session[:task]]`` (``schemas/namespaces.py``, the
    grammar the request models check) and return it unchanged.

    A namespace is an identifier (it scopes reads, and a 403 names it): one in which the
    detector finds a secret (``alice:AKIA...``) is refused, never rewritten, like ``project``
    and ``agent_id`` (``redaction.fields.check_identifiers``). Every domain call that takes a
    namespace from a request passes it through here before it names it anywhere (an audit
    row, a 403). ``refuse_secrets=False`` only to erase a namespace stored before that check.

    Raises:
        InvalidInput: naming ``field``, when the grammar refuses it, or when the namespace
            holds a secret.
    """
    check_grammar(value, field)
    if refuse_secrets:
        check_identifiers({field: value})
    return value


def parse_namespace_filter(value: str, field: str = "namespace") -> tuple[str | None, bool]:
    """Parse a listing filter: ``u:s`` (exactly that namespace), ``u:s:*`` (the subtree) or
    ``*`` (everything the key may see). Returns ``(namespace or None, subtree)``."""
    if value == SUBTREE:
        return None, True
    if value.endswith(":" + SUBTREE):
        return parse_namespace(value[:-2], field), True
    return parse_namespace(value, field), False


def ancestors(namespace: str) -> list[str]:
    """``u:s:t`` -> ``["u", "u:s", "u:s:t"]``."""
    parts = namespace.split(":")
    return [":".join(parts[: i + 1]) for i in range(len(parts))]


def within_prefix(namespace: str, prefix: str) -> bool:
    """True when ``namespace`` is ``prefix`` or lies under it (segment-wise, not string-wise:
    ``alice`` does not cover ``alicex``)."""
    return namespace == prefix or namespace.startswith(prefix + ":")


def allowed(namespace: str, prefixes: list[str]) -> bool:
    """True when a key limited to ``prefixes`` (empty: unlimited) may use ``namespace``."""
    return not prefixes or any(within_prefix(namespace, p) for p in prefixes)


def visible_namespaces(namespace: str, prefixes: list[str]) -> list[str]:
    """The namespaces a call at ``namespace`` reads: itself and its ancestors, minus those
    outside the key's prefixes."""
    return [ns for ns in ancestors(namespace) if allowed(ns, prefixes)]
