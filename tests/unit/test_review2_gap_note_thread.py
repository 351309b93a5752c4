"""The gap note names the thread that launched the GPU row ending the gap. It took the first GPU row after the gap
and, for host-bound, looked for the gap's stream among the next 256 rows only, falling back to whatever row came
first; for gpu-starvation it ignored the device. A gap cut at the window's end is followed by the rows launched
before the end and run after it, on any stream or device: the note then named another stream's (or device's)
launching thread as what the GPU waited for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit

MAIN, OTHER = 101, 555


def _launch(b: TraceBuilder, tid: int, name: str, ts: float, k_ts: float, k_dur: float, stream: int, dev: int) -> None:
    corr = b._next()
    b.events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": tid,
            "ts": ts,
            "dur": 5.0,
            "args": {"correlation": corr},
        }
    )
    args: dict[str, Any] = {"correlation": corr, "stream": stream, "device": dev}
    b.events.append(
        {"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": stream, "ts": k_ts, "dur": k_dur, "args": args}
    )


def _note(tmp_path: Path, b: TraceBuilder, rule: str) -> str:
    (f,) = analyze([b.write(tmp_path / "t.json")], rules=[rule]).findings_of(rule)
    note = f.evidence.examples[0].note
    assert note is not None
    return note


def test_host_bound_note_finds_the_stream_behind_a_burst(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0.0, 5_000.0)
    b.step(2, 5_000.0, 5_000.0)
    _launch(b, MAIN, "gemm_a", 50.0, 100.0, 2_000.0, stream=7, dev=0)
    for i in range(300):  # another thread's side-stream kernels, launched in the window, run after it
        _launch(b, OTHER, "side_k", 6_000.0 + i * 10, 10_001.0 + i * 20, 5.0, stream=9, dev=0)
    _launch(b, MAIN, "gemm_b", 9_000.0, 20_000.0, 2_000.0, stream=7, dev=0)  # ends stream 7's host_wait gap
    assert _note(tmp_path, b, "host-bound").startswith(f"host tid {MAIN}:")


def test_starvation_note_keeps_to_the_gap_device(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0.0, 600_000.0)
    b.step(2, 600_000.0, 600_000.0)
    _launch(b, MAIN, "gemm_a", 50.0, 100.0, 2_000.0, stream=7, dev=0)
    _launch(b, OTHER, "gemm_c", 60.0, 200.0, 1_100_000.0, stream=7, dev=1)  # device 1 busy meanwhile
    _launch(b, OTHER, "gemm_d", 1_150_000.0, 1_300_001.0, 5.0, stream=7, dev=1)  # first row after the window
    _launch(b, MAIN, "gemm_b", 1_100_000.0, 2_000_000.0, 5.0, stream=7, dev=0)  # ends GPU 0's gap
    assert _note(tmp_path, b, "gpu-starvation").startswith(f"host tid {MAIN}:")
