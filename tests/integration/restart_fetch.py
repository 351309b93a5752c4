"""`dyno-cli fetch --trace-id` of a trace that lived through a dynod restart, and its manifest: shared by the restart
integration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_cli

__all__ = ["fetch_processes", "manifest_processes"]


def manifest_processes(out_dir: Path, trace_id: str) -> list[dict[str, Any]]:
    """The processes of the manifest dyno-cli wrote for `trace_id` under `out_dir` (its --output-dir)."""
    return json.loads((out_dir / trace_id / "manifest.json").read_text())["processes"]


def fetch_processes(target: str, trace_id: str, out_dir: Path) -> list[dict[str, Any]]:
    """`dyno-cli fetch` of the trace from one host into `out_dir`, which must succeed; its manifest's processes,
    each one asserted done and fetched."""
    res = run_cli(
        "fetch", "--hosts", target, "--trace-id", trace_id, "--output-dir", str(out_dir), "--no-analyze",
        "--timeout-s", "30", timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    procs = manifest_processes(out_dir, trace_id)
    for p in procs:
        assert p["state"] == "done" and p["fetch"] == "fetched", p
    return procs
