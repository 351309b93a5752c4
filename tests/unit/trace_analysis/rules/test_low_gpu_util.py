"""low-gpu-util tells a GPU waiting for the host from one waiting with work queued. negative_queue's compute
stream idles 861 ms with its next kernels already launched (none waiting for a launch; a queue 946 deep), yet the
high finding sent the user to look for data loading and Python overhead on the host."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, queued: bool) -> Path:
    """Ten 10 µs kernels 1 ms apart: all launched up front (queued), or each launched after the previous ended."""
    b = TraceBuilder()
    for i in range(10):
        start = i * 1000.0
        call = i * 6.0 if queued else start - 20.0
        b.launch("compute_kernel", max(call, 0.0), start + 5.0, 10.0)
    return b.write(tmp_path / ("queued.json" if queued else "host.json"))


def _finding(path: Path):
    (f,) = analyze([path], rules=["low-gpu-util"]).findings_of("low-gpu-util")
    return f


def test_idle_with_work_queued_points_at_other_streams(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, queued=True))
    assert "compute stream 7 has work queued during 100% of the idle time" in f.title
    assert f.fix.startswith("The GPU idles with work already queued")
    assert f.evidence.counts["compute_stream_host_wait_us"] == 0.0
    assert f.evidence.counts["compute_stream_queued_idle_us"] == pytest.approx(9 * 990.0)


def test_idle_waiting_for_launches_keeps_the_host_fix(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, queued=False))
    assert "queued" not in f.title
    assert f.fix.startswith("Find what the host does while the GPU idles")
    assert f.evidence.counts["compute_stream_host_wait_us"] == pytest.approx(9 * 990.0)
