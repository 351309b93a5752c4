#!/usr/bin/env bash
# The end-to-end demo on this host: set up .venv, start dynod (simulated GPUs when no NVIDIA driver), show
# `dyno-cli status` and `metrics`, trace a real 2-rank torchrun CPU job under dyno-run (one rank planted slow,
# plus antipatterns), print the analysis report, then stop everything it started (dyno.demo).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[torch]'
exec .venv/bin/python -m dyno.demo "$@"
