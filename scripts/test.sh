#!/usr/bin/env bash
# Set up a virtualenv (.venv) with dyno, its dev tools and CPU torch, then run the whole test suite (pytest).
# Usage: bash scripts/test.sh [pytest args...]
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
exec .venv/bin/python -m pytest "$@"
