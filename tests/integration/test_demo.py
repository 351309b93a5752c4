"""The README's demo end to end: real dynod, real 2-rank torchrun DDP job, trace, analysis; nothing left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.torch]


def _demo_processes() -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if b"dyno.demo_trainer" in cmd or b"dyno-demo-" in cmd:
                pids.append(int(p.name))
    return pids


def test_demo_finds_the_straggler_and_the_planted_antipatterns():
    pytest.importorskip("torch")
    r = subprocess.run(
        [sys.executable, "-m", "dyno.demo"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "SIMULATED" in out or "nvml" in out  # status shows the GPU backend honestly
    findings = [ln for ln in out.splitlines() if re.match(r"\s*\d+\. \[(HIGH|MED |LOW |INFO)\]", ln)]
    assert any("straggler (rank 1)" in ln for ln in findings), out[-4000:]
    assert any("dataloader (rank 1)" in ln for ln in findings)
    assert any("optimizer" in ln and "single-tensor" in ln for ln in findings)
    assert any("zero_grad" in ln for ln in findings)
    assert _demo_processes() == [], "the demo left processes running"
