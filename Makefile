# ctxpack: two commands. `make run` serves on an embedded Postgres; `make test` passes the suite.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make run HOST=0.0.0.0 PORT=9000` overrides; unset, serve takes CTXPACK_HOST / CTXPACK_PORT
# (defaults 127.0.0.1:8080) like every other setting.
HOST ?=
PORT ?=

.PHONY: install run test test-citus bench-scale test-slow fuzz load bench lint clean screenshots console-bench

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), sys.version' || { echo "need Python >= 3.11 (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, as the CPU build: a plain `torch` would pull a multi-GB CUDA build.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/ctxpack serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

test: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/pytest -m "not slow" -q

# The API-level suite against a local Citus cluster (coordinator + 2 workers): builds Citus
# once into a cache outside the clone, starts the cluster, runs, stops it (docs/scaling.md).
# Needs clang. CITUS_SRC: the Citus source dir (default ../shared/citus).
test-citus: $(STAMP)
	PYTHON_BIN=$(BIN)/python tools/test_citus.sh

# One node against a 3-node Citus cluster at 100k memories / 1k orgs (SCALE_ARGS=--big: and 1M /
# 10k orgs), context p50/p99, batch writes, routing share (docs/scaling.md). SCALE_STORE keeps
# the seeded engines between runs: seed with SCALE_ARGS="--big --hnsw --seed-only" first, then
# measure with SCALE_ARGS="--big --hnsw --measure-only" in a quiet window. Needs clang.
SCALE_STORE ?= /var/tmp/ctxpack-scale
SCALE_ARGS ?=
bench-scale: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.scale --store $(SCALE_STORE) $(SCALE_ARGS)

test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/pytest -m slow -q

# The property tests with fresh random examples, FUZZ_RUNS times (`make test` draws the same
# ones every run). A failure prints the input: add it to the test as an @example.
FUZZ_RUNS ?= 5
fuzz: $(STAMP)
	for i in $$(seq $(FUZZ_RUNS)); do \
		CTXPACK_HYPOTHESIS_PROFILE=fuzz HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/pytest -q \
			-p no:cacheprovider tests/domain/redaction/test_engine.py tests/domain/test_write_gate.py \
			tests/mcp/test_limits.py || exit 1; \
	done

# Load: `ctxpack serve` (real model, embedded Postgres in LOAD_DIR, kept between runs so the
# seeding happens once), LOAD_MEMORIES stored, then mixed remember/context traffic at the
# highest clean rate for LOAD_SECONDS. Prints the rate and the p99 (python -m bench.load --help).
LOAD_DIR ?= /tmp/ctxpack-load
LOAD_MEMORIES ?= 100000
LOAD_SECONDS ?= 120
load: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.load --data-dir $(LOAD_DIR) \
		--memories $(LOAD_MEMORIES) --duration $(LOAD_SECONDS) $(LOAD_ARGS)

# The benchmark's own venv: the service plus the peers it is compared with (the `bench` extra),
# kept apart from .venv so that the peers' dependencies never reach the service's.
BENCH_VENV ?= .venv-bench
BENCH_BIN := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed
BENCH_ARGS ?=

$(BENCH_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), sys.version' || { echo "need Python >= 3.11 (set PYTHON=...)"; exit 1; }
	test -x $(BENCH_BIN)/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/pip install -q --upgrade pip
	$(BENCH_BIN)/pip install -q torch==2.13.0
	$(BENCH_BIN)/pip install -q -e '.[bench]'
	@touch $(BENCH_STAMP)

# The default benchmark (LoCoMo quality + speed at 10k and 100k, under 15 minutes); results in
# bench-results/. More: make bench BENCH_ARGS="--sizes 10000,100000 --budget-minutes 0"
bench: $(BENCH_STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BENCH_BIN)/python -m bench $(BENCH_ARGS)

# A PNG of each console page on a seeded demo store, in docs/screenshots/ (needs Debian's
# chromium and chromium-driver).
screenshots: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=. $(BIN)/python tools/screenshots.py

# Server-side render time of each console page at CONSOLE_BENCH_MEMORIES memories.
CONSOLE_BENCH_MEMORIES ?= 100000
console-bench: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=. $(BIN)/python -m bench.console \
		--memories $(CONSOLE_BENCH_MEMORIES)

lint: $(STAMP)
	$(BIN)/ruff check service tests tools bench
	$(BIN)/mypy service

clean:
	rm -rf $(VENV) $(BENCH_VENV) .pytest_cache
