"""How the speed stores are filled: ctxpack through its batch API (``ctxpack_seed``) or straight
into its table by COPY with vectors from the service's own embedder (``direct_seed``); the
peers with the very rows their own write paths write, carrying ctxpack's vectors
(``PeerCopy``, ``seed_mem0``); and the HNSW and GIN indexes dropped for a bulk load and built
again from their own definitions (``deferred_indexes``), after which the loaded tables are
vacuumed and analyzed (``settle``) before anything is timed.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.corpus import user_ns
from bench.harness import log, post_batch, progress
from bench.measured_writes import (
    InterleavedPace,
    against_embedder,
    stored_embed_texts,
    write_figure,
)

BATCH = 500  # items per /v1/remember/batch request (the API's limit)

# -------------------------------------------------------------------------- speed


def ctxpack_seed(
    client: Any,
    items: list[tuple[str, str, str, str]],
    desc: str,
    embedder: Any | None = None,
) -> dict[str, Any]:
    """Write ``items`` through /v1/remember/batch, 500 a request. The figure counts each
    status and gives ``per_s`` only when every item was stored (``write_figure``). With an
    ``embedder``, and every item stored, the embedder's own pace on exactly the texts the
    service embedded sits beside it (``against_embedder``), measured turn about with the
    service's batches (``InterleavedPace``); the batch's rate counts its requests' seconds
    only."""
    bar = progress(len(items), desc)
    counts: Counter[str] = Counter()
    near = 0
    pace = InterleavedPace(embedder, BATCH) if embedder is not None else None
    write_seconds = 0.0
    for i in range(0, len(items), BATCH):
        chunk = items[i : i + BATCH]
        t0 = time.perf_counter()
        res = post_batch(
            client,
            [
                {"content": text, "namespace": ns, "type": typ, "source": iid}
                for ns, iid, typ, text in chunk
            ],
        )
        took = time.perf_counter() - t0
        write_seconds += took
        counts.update(r["status"] for r in res["items"])
        near += sum(bool(r.get("near_duplicates")) for r in res["items"])
        if pace is not None:
            texts = stored_embed_texts(client, [text for *_, text in chunk], res["items"])
            pace.add(texts, took)
        bar.update(len(chunk))
    bar.close()
    figure = write_figure(counts, len(items), write_seconds, near)
    if pace is not None and "per_s" in figure:
        against_embedder(figure, pace.result())
    return figure


_TICKET = re.compile(r"[A-Z][A-Z0-9]*-(\d+)")


def ticket_number(text: str) -> str:
    """The number of the last ticket in a corpus text (``BILLING-104237`` → ``104237``),
    which is what makes each text of the speed corpus distinct."""
    found = _TICKET.findall(text)
    if not found:
        raise ValueError(f"no ticket in {text[:80]!r}")
    return str(found[-1])


class VectorPool:
    """The speed corpus's vectors embedded in this run, and the vectors of memories past the
    embedding budget, which are reused from them.

    Up to ``limit`` distinct texts are embedded with the model (``room``). A memory past them
    takes a pooled memory's type and text, with the pooled ticket number replaced by its own
    (so it stays distinct), and the pooled vector plus N(0, ``noise``) per dimension,
    renormalised, as bench/context_speed.py seeds: the store keeps the clusters of real
    text, its texts and vectors agree, and a million memories do not cost the 43 minutes
    of embedding them. A text seen before (the same users seeded again into another store)
    gets its own embedded vector back.
    """

    def __init__(self, limit: int, noise: float = 0.02, seed: int = 7) -> None:
        import numpy as np

        self.limit = limit
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.types: list[str] = []
        self.texts: list[str] = []
        self.vectors: list[Any] = []  # float32 rows
        self.index: dict[str, int] = {}

    @property
    def room(self) -> int:
        """How many more texts may be embedded."""
        return max(0, self.limit - len(self.texts))

    def add(self, items: Sequence[tuple[str, str, str, str]], vectors: Sequence[Any]) -> None:
        import numpy as np

        for (_, _, typ, text), vec in zip(items, vectors, strict=True):
            if text not in self.index:
                self.index[text] = len(self.texts)
                self.types.append(typ)
                self.texts.append(text)
                self.vectors.append(np.asarray(vec, dtype=np.float32))

    def known(self, text: str) -> Any | None:
        i = self.index.get(text)
        return None if i is None else self.vectors[i]

    def reuse(
        self, items: Sequence[tuple[str, str, str, str]]
    ) -> tuple[list[tuple[str, str, str, str]], list[Any]]:
        """Each item as a pooled memory with the item's ticket number, and its vector."""
        import numpy as np

        if not self.texts:
            raise ValueError("no embedded vectors to reuse: embed some first (limit > 0)")
        picks = self.rng.integers(len(self.texts), size=len(items))
        out: list[tuple[str, str, str, str]] = []
        vecs: list[Any] = []
        for (ns, iid, _, text), k in zip(items, picks, strict=True):
            base = self.texts[k]
            at = list(_TICKET.finditer(base))[-1].span(1)
            out.append(
                (ns, iid, self.types[k], base[: at[0]] + ticket_number(text) + base[at[1] :])
            )
            vec = self.vectors[k] + self.rng.normal(0.0, self.noise, self.vectors[k].shape[0])
            vecs.append((vec / np.linalg.norm(vec)).astype(np.float32))
        return out, vecs


def direct_seed(
    client: Any,
    ctx_url: str,
    data_dir: Path,
    items: list[tuple[str, str, str, str]],
    desc: str,
    sinks: Sequence[Callable[[list[tuple[str, str, str, list[float]]]], None]] = (),
    pool: VectorPool | None = None,
) -> dict[str, Any]:
    """Write ``items`` straight into ctxpack's memories table (COPY), embedded in this
    process by the service's own embedder (same model, same document pipeline as
    /v1/remember/batch: ONNX, or the bf16 lane where the CPU has it), with the name and
    content hash remember would derive. What it skips is the HTTP hop, the write gate and the
    duplicate checks (the synthetic corpus is clean and distinct). It lets the default run
    reach 100k within its budget; write speed is measured through the API separately.

    A thread embeds the next chunk while this one is written, and each written chunk's
    (namespace, source, content, vector) rows go to every ``sink`` (the peers' stores), so the
    database work overlaps the model's instead of following it.

    With a ``pool``, only what fits its budget is embedded; the rest reuse its vectors
    (``VectorPool.reuse``), and the result says how many of each (``seed_method``)."""
    import queue

    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from service.config import Settings
    from service.domain.remember import derive_name, document_text
    from service.domain.write_pipeline import content_hash
    from service.embedding import build_embedder
    from service.store.bulk import copy_memories

    org_id = uuid.UUID(client.get("/v1/whoami").json()["org_id"])
    embedder = build_embedder(Settings(data_dir=data_dir))
    ready: queue.Queue[Any] = queue.Queue(maxsize=2)

    counts: Counter[str] = Counter()

    def embed(chunk: Sequence[tuple[str, str, str, str]]) -> list[Any]:
        counts["embedded"] += len(chunk)
        return embedder.embed_documents(
            [document_text(derive_name(text), text) for _, _, _, text in chunk]
        )

    def with_vectors(
        chunk: list[tuple[str, str, str, str]],
    ) -> tuple[list[tuple[str, str, str, str]], list[Any]]:
        if pool is None:
            return chunk, embed(chunk)
        slots: list[Any] = [pool.known(text) for _, _, _, text in chunk]
        counts["known"] += sum(v is not None for v in slots)
        todo = [j for j, v in enumerate(slots) if v is None]
        fresh, reused = todo[: pool.room], todo[pool.room :]
        if fresh:
            vecs = embed([chunk[j] for j in fresh])
            pool.add([chunk[j] for j in fresh], vecs)
            for j, vec in zip(fresh, vecs, strict=True):
                slots[j] = vec
        if reused:
            counts["reused"] += len(reused)
            again, vecs = pool.reuse([chunk[j] for j in reused])
            chunk = list(chunk)
            for j, item, vec in zip(reused, again, vecs, strict=True):
                chunk[j], slots[j] = item, vec
        return chunk, slots

    def produce() -> None:
        try:
            for i in range(0, len(items), 2000):
                te = time.perf_counter()
                chunk, vecs = with_vectors(items[i : i + 2000])
                names = [derive_name(text) for _, _, _, text in chunk]
                ready.put((chunk, names, vecs, time.perf_counter() - te))
            ready.put(None)
        except BaseException as exc:  # handed to the writer, which raises it
            ready.put(exc)

    bar = progress(len(items), desc)
    t0 = time.perf_counter()
    embed_s = sink_s = 0.0
    threading.Thread(target=produce, name="seed-embed", daemon=True).start()
    with psycopg.connect(ctx_url) as conn:
        register_vector(conn)
        while (got := ready.get()) is not None:
            if isinstance(got, BaseException):
                raise got
            chunk, names, vecs, dt = got
            embed_s += dt
            copy_memories(
                conn,
                ("org_id", "id", "namespace", "type", "name", "content", "content_hash",
                 "embedding", "source"),
                (
                    (org_id, uuid.uuid4(), ns, typ, name, text, content_hash(text),
                     np.asarray(vec, dtype=np.float32), iid)
                    for (ns, iid, typ, text), name, vec in zip(chunk, names, vecs, strict=True)
                ),
            )  # fmt: skip
            conn.commit()
            ts = time.perf_counter()
            rows = [
                (ns, iid, text, vec) for (ns, iid, _, text), vec in zip(chunk, vecs, strict=True)
            ]
            for sink in sinks:
                sink(rows)
            sink_s += time.perf_counter() - ts
            bar.update(len(chunk))
    bar.close()
    wall = time.perf_counter() - t0
    return {
        "sent": len(items),
        "created": len(items),
        "seconds": round(wall, 1),
        "per_s": round(len(items) / wall, 1) if wall else None,
        "embed_seconds": round(embed_s, 1),
        "peer_write_seconds": round(sink_s, 1),
        "method": "copy",
        "embedded": counts["embedded"],
        "vectors_known": counts["known"],
        "vectors_reused": counts["reused"],
        "seed_method": seed_method(counts["embedded"] + counts["known"], counts["reused"], pool),
    }


def seed_method(embedded: int, reused: int, pool: VectorPool | None) -> str:
    """What a bulk load's vectors are, in words (the JSON's ``seed_method``, the report's)."""
    if not reused or pool is None:
        return "embedded: every memory's text embedded by the model"
    return (
        f"reused vectors: {embedded:,} memories embedded by the model, {reused:,} with a text "
        f"and vector reused from the {len(pool.texts):,} embedded in this run (another ticket "
        f"number; the vector plus N(0, {pool.noise:g}) noise per dimension, renormalised)"
    )


@contextmanager
def deferred_indexes(
    db_url: str,
    tables: Sequence[str],
    built: dict[str, float],
    work_mem: str = "1GB",
    settled: dict[str, float] | None = None,
) -> Iterator[None]:
    """Drop the HNSW and GIN indexes on ``tables`` (the tables the load writes) for a bulk
    load and build them again from their own definitions (``pg_indexes.indexdef``) when it
    ends, as a bulk import would: one index build instead of a graph insert per row. The store
    ends with the very indexes it had, plus, for ``memories``, the namespace indexes its big
    namespaces now need (``index_namespaces``); the measured writes that follow go through
    them. Then, if the load succeeded, every one of ``tables`` is settled (``settle``). Build
    seconds go to ``built``, settling seconds to ``settled``."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(db_url, autocommit=True) as conn:
        defs = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = ANY(%s) AND indexdef ~ ' USING (hnsw|gin) '",
            (list(tables),),
        ).fetchall()
        for name, _ in defs:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        try:
            yield
        finally:
            conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(work_mem)))
            for name, ddl in defs:
                t0 = time.perf_counter()
                conn.execute(ddl)
                built[name] = round(time.perf_counter() - t0, 1)
            if "memories" in tables:
                t0 = time.perf_counter()
                index_namespaces(db_url)
                built["namespace indexes"] = round(time.perf_counter() - t0, 1)
    settle(db_url, tables, settled)


def settle(db_url: str, tables: Sequence[str], settled: dict[str, float] | None = None) -> None:
    """``VACUUM (ANALYZE)`` each of ``tables``: the work autovacuum would do on a bulk load's
    fresh rows in its own time, done before anything is timed: otherwise the autovacuum worker
    may take a core during a measurement, and until a vacuum has run, reads set the hint bits
    of the fresh pages and index-only scans visit the heap (no visibility map), on top of
    stale planner statistics. (The scope table's slow 100k row, 108.9 and 140.4 ms p50, was
    first laid to this; its cause was the server's cached common lexemes, see
    store/retrieval.py ``NO_COMMON_TERMS_TTL``.) A peer's loaded tables are settled the same way, so the
    comparison stays fair. VACUUM cannot run in a transaction, hence autocommit; on a Citus
    coordinator it reaches the shards of a distributed table. Seconds per table go to
    ``settled`` and to the log."""
    import psycopg
    from psycopg import sql

    took: dict[str, float] = {}
    with psycopg.connect(db_url, autocommit=True) as conn:
        for table in tables:
            t0 = time.perf_counter()
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
            took[table] = round(time.perf_counter() - t0, 1)
        database = conn.info.dbname
    log(f"settled {database}: VACUUM (ANALYZE) {', '.join(f'{t} {s} s' for t, s in took.items())}")
    if settled is not None:
        settled.update(took)


def prewarm(db_url: str, tables: Sequence[str]) -> dict[str, float]:
    """Read each of ``tables`` and every index of it into Postgres's shared buffers
    (``pg_prewarm`` in ``buffer`` mode, the extension created if missing; what does not fit
    stays in the operating system's page cache, which the read went through), as a server
    that has been answering for a while has its store's pages: a big store seeded in an
    earlier run, or pushed out by another size's, otherwise pays a disk read per cold page,
    and the timings measure the page cache rather than the code (the 1M context p50 measured
    25.3 ms with about 70% of its heap cached, 20.6 ms in a run that had it all; a batch's
    duplicate probes into the 1M store 340-460 ms from the page cache, 66-89 ms from shared
    buffers). Each peer's tables are read the same way before its own measurement. Returns
    the seconds it took and the 8 kB blocks read."""
    import psycopg

    t0 = time.perf_counter()
    blocks = 0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for table in tables:
            row = conn.execute(
                """
                SELECT sum(pg_prewarm(c.oid, 'buffer'))
                FROM pg_class c
                WHERE c.oid = CAST(%(t)s AS regclass)
                   OR c.oid IN (SELECT indexrelid FROM pg_index
                                WHERE indrelid = CAST(%(t)s AS regclass))
                """,
                {"t": table},
            ).fetchone()
            blocks += int(row[0] or 0) if row else 0
        database = conn.info.dbname
    took = round(time.perf_counter() - t0, 1)
    log(f"prewarmed {database}: {', '.join(tables)} and their indexes, {blocks} blocks, {took} s")
    return {"seconds": took, "blocks": blocks}


async def namespace_index_pass(db_url: str, min_rows: int | None = None) -> None:
    """One pass of the service's namespace index job (store/namespace_indexes.py) on
    ``db_url``, with threshold ``min_rows`` (default: the service's,
    ``CTXPACK_EXACT_SCAN_MAX_ROWS``; a huge one drops every namespace index). Waits for a
    pass a running server holds, then passes again."""
    import asyncio

    from service.config import Settings
    from service.store import namespace_indexes
    from service.store.database import create_engine

    settings = Settings()  # type: ignore[call-arg]
    threshold = settings.exact_scan_max_rows if min_rows is None else min_rows
    engine = create_engine(db_url, settings)
    try:
        while (
            await namespace_indexes.sync(
                engine, threshold, max_indexed=settings.namespace_index_max
            )
        ).skipped:
            await asyncio.sleep(1.0)
    finally:
        await engine.dispose()


def index_namespaces(db_url: str) -> None:
    """``namespace_index_pass`` now, at the service's threshold: a bulk load's big namespaces
    get their own indexes before anything is measured, rather than up to a job interval
    later. Runs its own event loop, on a thread of its own (the caller may be inside one)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, namespace_index_pass(db_url)).result()


def fetch_vectors(
    db_url: str, first_user: int
) -> Iterable[list[tuple[str, str, str, list[float]]]]:
    """ctxpack's stored (namespace, source, content, vector) rows of the speed users from
    ``first_user`` on, in chunks."""
    import psycopg

    with psycopg.connect(db_url) as conn, conn.cursor(name="vectors") as cur:
        cur.itersize = 2000
        cur.execute(
            "SELECT namespace, source, content, embedding::text FROM memories "
            "WHERE namespace LIKE 'u%%' AND namespace >= %s AND source IS NOT NULL "
            "ORDER BY namespace, source",
            (user_ns(first_user),),
        )
        while rows := cur.fetchmany(2000):
            yield [
                (ns, src, content, [float(x) for x in json.loads(vec)])
                for ns, src, content, vec in rows
            ]


def namespace_rows(
    db_url: str, namespace: str
) -> Iterable[list[tuple[str, str, str, list[float]]]]:
    """ctxpack's stored (namespace, id, content, vector) rows of one namespace, in chunks:
    the rows a peer is given for the same scope (keyed by ctxpack's memory id)."""
    import psycopg

    with psycopg.connect(db_url) as conn, conn.cursor(name="scope") as cur:
        cur.itersize = 2000
        cur.execute(
            "SELECT namespace, id::text, content, embedding::text FROM memories "
            "WHERE namespace = %s ORDER BY id",
            (namespace,),
        )
        while rows := cur.fetchmany(2000):
            yield [
                (ns, key, content, [float(x) for x in json.loads(vec)])
                for ns, key, content, vec in rows
            ]


def mem0_payload(ns: str, src: str, content: str, now: str) -> dict[str, Any]:
    """The payload mem0's ``add(content, user_id=ns, metadata={"item_id": src}, infer=False)``
    stores with the vector (mem0 2.x, ``Memory._create_memory``)."""
    from mem0.utils.lemmatization import lemmatize_for_bm25

    return {
        "item_id": src,
        "user_id": ns,
        "role": "user",
        "data": content,
        "hash": hashlib.md5(content.encode()).hexdigest(),
        "created_at": now,
        "updated_at": now,
        "text_lemmatized": lemmatize_for_bm25(content),
    }


def seed_mem0(peer: Any, rows: list[tuple[str, str, str, list[float]]]) -> None:
    """The rows mem0's ``add(text, user_id=ns, metadata={"item_id": ...}, infer=False)`` writes
    (vector + payload), inserted through mem0's own vector store in one call per chunk."""
    now = datetime.now(UTC).isoformat()
    payloads = [mem0_payload(ns, src, content, now) for ns, src, content, _ in rows]
    ids = [str(uuid.uuid4()) for _ in rows]
    peer.memory.vector_store.insert(vectors=[r[3] for r in rows], payloads=payloads, ids=ids)


class PeerCopy:
    """Speed-store rows written straight into a peer's tables by COPY: the very rows its own
    write path writes (LangGraph ``store.batch`` of ``PutOp((ns,), src, {"text": content})``:
    one ``store`` row and one ``store_vectors`` row for field ``text``; mem0
    ``add(infer=False)``: id, vector and the payload of ``mem0_payload``), carrying ctxpack's
    vectors. Their write calls cost about as much CPU as the model on this machine, and the
    CPU is what the 100k load runs short of; their write speed is measured separately through
    their own calls. ``check`` reads one row back through the peer's own API."""

    def __init__(self, peer: Any) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        self.peer = peer
        self.conn = psycopg.connect(peer.url)
        register_vector(self.conn)
        self.sample: tuple[str, str, str] | None = None

    def __call__(self, rows: list[tuple[str, str, str, list[float]]]) -> None:
        import numpy as np
        from psycopg import sql
        from psycopg.types.json import Jsonb

        now = datetime.now(UTC)
        with self.conn.cursor() as cur:
            if self.peer.name == "langgraph":
                with cur.copy(
                    "COPY store (prefix, key, value, created_at, updated_at) FROM STDIN"
                ) as cp:
                    for ns, src, content, _ in rows:
                        cp.write_row((ns, src, Jsonb({"text": content}), now, now))
                with cur.copy(
                    "COPY store_vectors (prefix, key, field_name, embedding, created_at, "
                    "updated_at) FROM STDIN WITH (FORMAT BINARY)"
                ) as cp:
                    cp.set_types(["text", "text", "text", "vector", "timestamptz", "timestamptz"])
                    for ns, src, _, vec in rows:
                        cp.write_row((ns, src, "text", np.asarray(vec, np.float32), now, now))
                self.sample = (rows[0][0], rows[0][1], rows[0][2])
            else:
                iso = now.isoformat()
                stmt = sql.SQL("COPY {} (id, vector, payload) FROM STDIN").format(
                    sql.Identifier(self.peer.collection)
                )
                first = str(uuid.uuid4())
                with cur.copy(stmt) as cp:
                    for i, (ns, src, content, vec) in enumerate(rows):
                        cp.write_row(
                            (
                                first if i == 0 else str(uuid.uuid4()),
                                np.asarray(vec, np.float32),
                                Jsonb(mem0_payload(ns, src, content, iso)),
                            )
                        )
                self.sample = (first, rows[0][1], rows[0][2])
        self.conn.commit()

    def check(self) -> None:
        """One written row read back through the peer's own API."""
        if self.sample is None:
            return
        a, src, content = self.sample
        if self.peer.name == "langgraph":
            item = self.peer.store.get((a,), src)
            got = item.value.get("text") if item else None
        else:
            got = (self.peer.memory.get(a) or {}).get("memory")
        if got != content:
            raise SystemExit(f"{self.peer.name}: a COPY-seeded row reads back as {got!r}")

    def close(self) -> None:
        self.conn.close()
