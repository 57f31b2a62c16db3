"""ctxpack's benchmarks as a package (installed with the ``bench`` extra).

- ``bench.run``: the default benchmark, LoCoMo quality and speed against LangGraph and mem0
  (``ctxpack bench``, ``python -m bench``, ``make bench``);
  its parts: ``bench.quality``, ``bench.speed``, ``bench.corpus``, ``bench.seeding``,
  ``bench.measured_writes``, ``bench.report`` and ``bench.harness``;
- ``bench.write_ratio``: batch remember against the embedder alone on the same texts;
- ``bench.measured_writes``: the rules every measured write follows (texts new to the store,
  a rate only when every item was stored, the embedder timed on exactly the stored texts);
- ``bench.load``: mixed remember/context traffic at the highest clean rate (``make load``);
- ``bench.seed``: realistic memories through the HTTP batch API;
- ``bench.peers``: the peers the benchmark is compared with;
- ``bench.audit_overhead``: what writing the audit row adds to a call;
- ``bench.gate_report``: the write gate against LoCoMo's turns;
- ``bench.wake``: wake-pack quality (precision/recall on a labelled fixture) and latency;
- ``bench.redaction_corpus`` / ``bench.redaction_eval``: the generated secrets corpus, and
  ctxpack's redactor against detect-secrets on it;
- ``bench.console``: server-side render time of each console page at N memories
  (``make console-bench``);
- ``bench.dedup``: what the duplicate checks cost a write;
- ``bench.export_memory``: peak memory of ``ctxpack export`` at growing sizes;
- ``bench.locomo_ingest_parity``: ``ctxpack ingest`` against the LoCoMo benchmark's loader;
- ``bench.client_speed``: the Python client's writes (keyed, batched) against a server;
- ``bench.stats``: the one percentile definition every report uses;
- ``bench.scale``: one node against a 3-node Citus cluster at 1k and 10k orgs: context
  latency, batch writes, routing share, HNSW recall (``make bench-scale``).

- ``bench.context_speed``: context latency and throughput over HTTP on a seeded store;
- ``bench.phase_timings``: where a context or write call spends its time, phase by phase;
- ``bench.embed_speed``: the embedder's throughput, per backend and precision;
- ``bench.peers_smoke``: a quick check that the peers (LangGraph, mem0) run here.

Seeding that bypasses the API (COPY) goes through ``service.store.bulk``. Every module runs
as ``python -m bench.<name>``; ``tools/`` holds only repo tools (the settings table, the
README's results, screenshots).
"""
