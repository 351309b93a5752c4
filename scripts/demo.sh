#!/usr/bin/env bash
# The end-to-end demo on this host: set up .venv, start dynod (simulated GPUs when no NVIDIA driver), show
# `dyno-cli status` and `metrics`, trace a real 2-rank torchrun CPU job under dyno-run (one rank planted slow,
# plus antipatterns), print the analysis report; periodic profiling of that job and a second one (tiny ops), analysed
# on the host, then `dyno-cli jobs` and `dyno-cli opportunities`; then stop everything it started (dyno.demo).
# The set-up says what it does before each step: on a fresh machine it takes about a minute and prints nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { echo "demo: $*" >&2; }
if [ ! -x .venv/bin/python ]; then
  say "creating a virtualenv in $(pwd)/.venv ..."
  "$PY" -m venv .venv
fi
if .venv/bin/python -c 'import dyno, torch' >/dev/null 2>&1; then
  say "updating dyno in .venv (pip install -e '.[torch]') ..."
else
  say "installing dyno and its dependencies (grpcio, numpy, a CPU build of torch) into .venv with pip;" \
      "on a fresh machine this takes about a minute ..."
fi
start=$SECONDS
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[torch]'
say "set-up done in $((SECONDS - start)) s; starting the demo"
exec .venv/bin/python -m dyno.demo "$@"
