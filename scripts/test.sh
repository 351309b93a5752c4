#!/usr/bin/env bash
# Set up a virtualenv (.venv) with dyno, its dev tools and CPU torch, then run the whole test suite (pytest).
# Usage: bash scripts/test.sh [pytest args...]   (DYNO_TEST_WORKERS=N: N parallel workers, default 4; 0: serial)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch is pinned (CPU build from local disk); an unpinned torch would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,torch]'
# promtool (Debian package prometheus) makes the Prometheus exposition test stricter; best effort only.
if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
   && [ "${DYNO_SKIP_PROMTOOL:-}" = "" ]; then
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus) >/dev/null 2>&1 \
    || echo "note: could not install promtool; its check will be skipped"
fi
# node and npm run the @grpc/grpc-js client examples (examples/node, tests/integration/test_grpc_api.py), whose
# packages go into build/node-examples; best effort only: without them those tests are skipped, saying why.
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
   && [ "${DYNO_SKIP_NODE:-}" = "" ]; then
  echo "installing node and npm (Debian packages) for the Node client examples..."
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm) >/dev/null 2>&1 \
    || echo "note: could not install node/npm; the Node example tests will be skipped"
fi
if command -v npm >/dev/null 2>&1 && [ ! -d build/node-examples/node_modules/@grpc/reflection ]; then
  mkdir -p build/node-examples && cp examples/node/package.json build/node-examples/
  npm install --no-audit --no-fund --silent --prefix build/node-examples >/dev/null 2>&1 \
    || echo "note: npm install of the Node examples' packages failed; their tests will be skipped"
fi
# Parallel workers (pytest-xdist): much of the suite waits on real processes (dynods, trainers, timeouts), so more
# workers than CI's 2 cores keep both busy. A file's tests stay on one worker (--dist loadfile): its module-scoped
# daemons start once. DYNO_TEST_WORKERS=0 runs serially; a -n/--dist given here wins (the last one counts).
WORKERS=${DYNO_TEST_WORKERS:-4}
PARALLEL=(-n "$WORKERS" --dist loadfile)
for arg in "$@"; do
  case "$arg" in -pno:xdist | no:xdist) PARALLEL=() ;; esac
done
if [ "$WORKERS" = 0 ]; then PARALLEL=(); fi
exec .venv/bin/python -m pytest ${PARALLEL[@]+"${PARALLEL[@]}"} "$@"  # (an empty array is "unbound" to bash < 4.4)
