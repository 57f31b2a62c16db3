"""The write pipeline: validate -> redact -> gate -> hash, once for every write.

remember (one item or a batch), PATCH /v1/memories/{id} and artifacts all store text through
this module, so the rule is written once:

1. **validate**: no NUL in content or name (Postgres text cannot hold it); metadata within
   ``max_metadata_bytes`` as JSON and ``max_metadata_depth`` levels;
2. **redact** secrets and PII from content, name, url, source and metadata (one ``Redactor``
   for the process, ``REDACTOR``), counting replacements per label;
3. **gate** what is left once the secrets are gone: the redaction placeholders
   (``[LABEL:REDACTED]``, ``redaction.PLACEHOLDER_RE``) are stripped before the write gate
   sees the content (when the write had anything redacted), so a memory that was only a
   secret carries nothing worth keeping, and a placeholder never makes a fragment look like
   a statement. remember and PATCH gate the same text the same way;
4. **hash** the redacted content (``content_hash``: NFKC, case-folded, whitespace
   collapsed, SHA-256), the key of exact deduplication.

Nothing unredacted leaves this step: callers store, embed and audit only what it returns.
Artifacts use steps 1-2 (an artifact's body is data, not a statement: it is not gated, and
its hash is its id's).

``WritePipeline.for_settings(settings)`` returns the same pipeline for the same gate
thresholds, so the resources' pipeline (``service.resources``) and a domain function's are
one object.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from service.config import Settings
from service.domain.redaction import PLACEHOLDER_RE, REDACTOR, Redactor
from service.domain.redaction.fields import redact_fields
from service.domain.write_gate import HINTS, GateConfig, GateReason, GateVerdict, WriteGate
from service.errors import InvalidInput
from service.schemas.common import non_finite_path

_WS = re.compile(r"\s+")


def normalize(content: str) -> str:
    """What counts as "the same content": NFKC, case-folded, whitespace collapsed."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", content)).strip().casefold()


def content_hash(content: str) -> str:
    return hashlib.sha256(normalize(content).encode()).hexdigest()


def strip_placeholders(text: str) -> str:
    """``text`` without its redaction placeholders: what the gate judges."""
    return PLACEHOLDER_RE.sub(" ", text).strip()


def gate_config(settings: Settings) -> GateConfig:
    """The gate's thresholds, each overridable by ``CTXPACK_GATE_<FIELD>``."""
    overrides: dict[str, Any] = {}
    for f in fields(GateConfig):
        value = getattr(settings, f"gate_{f.name}", f.default)
        overrides[f.name] = tuple(value) if isinstance(value, list) else value
    return GateConfig(**overrides)


def _json_depth(value: Any, depth: int = 0) -> int:
    if isinstance(value, dict):
        return max([_json_depth(v, depth + 1) for v in value.values()], default=depth + 1)
    if isinstance(value, list):
        return max([_json_depth(v, depth + 1) for v in value], default=depth + 1)
    return depth


def check_metadata(metadata: dict[str, Any], settings: Settings, field_name: str) -> None:
    """422 unless metadata is finite JSON within the configured size and nesting depth."""
    where = non_finite_path(metadata)
    if where is not None:
        raise InvalidInput(
            field_name, f"non-finite number (NaN or Infinity) at {where!r}: not JSON"
        )
    depth = _json_depth(metadata)
    if depth > settings.max_metadata_depth:
        raise InvalidInput(
            field_name,
            f"metadata nests {depth} levels deep; at most {settings.max_metadata_depth}",
        )
    size = len(json.dumps(metadata, default=str).encode())
    if size > settings.max_metadata_bytes:
        raise InvalidInput(
            field_name,
            f"metadata is {size} bytes as JSON; at most {settings.max_metadata_bytes}",
        )


@dataclass
class CleanWrite:
    """A write after the pipeline. A field left out of the write is None here too.

    Attributes:
        content: redacted content (None when the write carries none, as a PATCH may).
        name, url, source, domain, origin: redacted, or None.
        tags: redacted and deduplicated (first occurrence kept), or None.
        metadata: redacted metadata, or None when the write carries none.
        redactions: replacements per label, over every field.
        verdict: the gate's verdict on the content (None without content).
        hash: ``content_hash`` of the redacted content ("" without content, or when the
            gate refused it).
    """

    content: str | None = None
    name: str | None = None
    url: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    domain: str | None = None
    origin: str | None = None
    tags: list[str] | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    verdict: GateVerdict | None = None
    hash: str = ""

    @property
    def accepted(self) -> bool:
        return self.verdict is None or self.verdict.accepted

    @property
    def redaction_count(self) -> int:
        return sum(self.redactions.values())


@dataclass(frozen=True)
class WritePipeline:
    """validate -> redact -> gate -> hash (see the module docstring)."""

    settings: Settings
    gate: WriteGate
    redactor: Redactor = REDACTOR

    _by_config: ClassVar[dict[tuple[GateConfig, int, int], WritePipeline]] = {}

    @classmethod
    def for_settings(cls, settings: Settings) -> WritePipeline:
        """The pipeline for these settings' gate thresholds and metadata bounds (one per
        distinct configuration in the process)."""
        config = gate_config(settings)
        key = (config, settings.max_metadata_bytes, settings.max_metadata_depth)
        pipeline = cls._by_config.get(key)
        if pipeline is None:
            pipeline = cls._by_config[key] = cls(settings, WriteGate(config))
        return pipeline

    def check_gate(
        self, content: str, *, type: str, name: str | None, redacted: bool
    ) -> GateVerdict:
        """Step 3 alone: gate redacted ``content``; when the write had anything redacted,
        with its placeholders stripped first."""
        judged = strip_placeholders(content) if redacted else content
        return self.gate.check(judged, type=type, name=name)

    def run(
        self,
        *,
        type: str,
        content: str | None = None,
        name: str | None = None,
        url: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
        domain: str | None = None,
        origin: str | None = None,
        tags: list[str] | None = None,
        field_prefix: str = "",
    ) -> CleanWrite:
        """Validate, redact, gate and hash one write's fields. CPU work on text: callers run
        it in a worker thread, never on the event loop.

        Args:
            type: the memory type (the gate lets code through for code types).
            content, name, url, source, metadata, domain, origin, tags: the write's fields;
                None when absent. Every one is redacted (JSON keys as well as values).
            field_prefix: prepended to field names in errors (``items.3.`` in a batch).

        Returns:
            The redacted fields, the counts, the verdict and the hash. A gate rejection is
            returned (``accepted`` False), not raised, so a batch can carry on. Content
            longer than the gate's ``max_chars`` is refused as ``oversize`` before it is
            scanned (size before redaction: megabytes of text cost no regex time).

        Raises:
            InvalidInput: NUL in content or name; metadata too big or too deep.

        The fields that scope reads (project, agent_id, relationship labels) are never
        rewritten: callers refuse them first when they hold a secret
        (``redaction.fields.check_identifiers``), before any rights check names them.
        """
        if metadata is not None:
            check_metadata(metadata, self.settings, f"{field_prefix}metadata")
        if content is not None and "\x00" in content:
            raise InvalidInput(f"{field_prefix}content", "NUL characters are not allowed in text")
        if name is not None and "\x00" in name:
            raise InvalidInput(f"{field_prefix}name", "NUL characters are not allowed in text")
        out = CleanWrite()
        if content is not None and len(content) > self.gate.config.max_chars:
            out.verdict = GateVerdict(False, (GateReason("oversize", HINTS["oversize"]),))
            return out
        values, out.redactions = redact_fields(
            {
                "content": content,
                "name": name,
                "url": url,
                "source": source,
                "domain": domain,
                "origin": origin,
                "tags": tags,
                "metadata": metadata,
            }
        )
        out.content = values["content"]
        out.name = values["name"]
        out.url = values["url"]
        out.source = values["source"]
        out.domain = values["domain"]
        out.origin = values["origin"]
        if tags is not None:
            out.tags = list(dict.fromkeys(values["tags"]))
        if metadata is not None:
            out.metadata = values["metadata"] if isinstance(values["metadata"], dict) else {}
        if out.content is not None:
            out.verdict = self.check_gate(
                out.content, type=type, name=out.name, redacted=bool(out.redactions)
            )
            if out.verdict.accepted:
                out.hash = content_hash(out.content)
        return out
