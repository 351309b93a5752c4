"""The README's demo end to end: real dynod, a real 2-rank torchrun DDP job traced on demand and analysed, a second job,
both profiled periodically and analysed on the host, jobs and opportunities ranked; nothing left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# alone: its rules judge the trainers by their share of wall time, which parallel workers' tests would take
pytestmark = [pytest.mark.integration, pytest.mark.torch, pytest.mark.alone]


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
        timeout=360,
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
    # periodic profiling: each job's periodic trace analysed on the host names its planted problem
    analysed = [
        ln for ln in out.splitlines() if re.match(r"demo-\S+: trace periodic-demo-\S+ analysed on the host: ", ln)
    ]
    assert any(ln.startswith("demo-tinyops-") and "tiny-ops" in ln for ln in analysed), out[-4000:]
    assert any(not ln.startswith("demo-tinyops-") and "straggler" in ln for ln in analysed), out[-4000:]
    # dyno-cli jobs lists both jobs with their latest analysis; opportunities ranks both jobs' problems
    jobs = out.split("$ dyno-cli jobs", 1)[1].split("$ dyno-cli opportunities", 1)
    assert re.search(r"^demo-tinyops-\S+ .* tiny-ops \d+%$", jobs[0], re.M), jobs[0]
    assert re.search(r"^demo-(?!tinyops)\S+ .* [a-z-]+ \d+%$", jobs[0], re.M), jobs[0]
    ranked = re.findall(r"^\s+\d+\s+([a-z-]+)\s+[<\d.]+\s", jobs[1], re.M)
    assert {"straggler", "dataloader", "tiny-ops"} <= set(ranked), jobs[1][:3000]
    assert _demo_processes() == [], "the demo left processes running"
