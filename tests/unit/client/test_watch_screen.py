"""`dyno-cli metrics --watch` fits the terminal: on 80x24 no row wraps and the header stays on screen at each redraw.
Samples from the real host sampler (this machine's /proc, or a fixed tree where the screen must not vary) and the
simulated GPU sampler; a screen is checked for its width, its height, and the line saying what was left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.client.commands.metrics import render, watch_screen
from dyno.client.watch_screen import Block, fit_screen
from dyno.daemon.history import Sample
from dyno.daemon.samplers.gpu_sim import SimGpuSampler
from dyno.daemon.samplers.host import HostSampler
from dyno.daemon.wire import sample_message
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _sample(gpus: int) -> dyno_pb2.Sample:
    host = HostSampler()
    host.sample()  # rates need a previous reading
    readings = tuple(host.sample()) + tuple(SimGpuSampler(gpus).sample())
    return sample_message(Sample(1_796_000_000_000, readings))


def _check(screen: str, width: int, height: int) -> list[str]:
    lines = screen.splitlines()
    assert len(lines) <= height - 1, f"{len(lines)} lines on a {height}-line terminal"
    assert max(len(line) for line in lines) <= width
    return lines


@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40), (40, 10)])
def test_the_live_view_fits_and_says_what_was_left_out(width: int, height: int) -> None:
    sample = _sample(8)
    assert len(render(sample, "gpu1").splitlines()) > 24  # the full view would not fit
    lines = _check(watch_screen(sample, "gpu1:1778", [], width, height), width, height)
    note = " ".join(lines[next(i for i, line in enumerate(lines) if line.startswith("not shown")) :])
    assert lines[0].startswith("gpu1:1778  sample at "[:width])
    assert width < 80 or lines[0].endswith("values)  simulated GPUs")
    assert any(line.startswith("HOST ") for line in lines)
    assert note.startswith(f"not shown ({width}x{height}): ")
    if height >= 24:  # every GPU has its row, with its utilization
        assert [line.split()[0] for line in lines if line[:1].isdigit()] == [str(g) for g in range(8)]
        assert "UTIL" in next(line for line in lines if line.startswith("GPU "))
    else:
        assert "the GPU table (8 row(s))" in note
    if width == 80:
        assert "column(s) of the GPU table (PCIE RX" in note and "--names PATTERN" in note


def test_many_gpus_cut_rows_and_say_how_many() -> None:
    lines = _check(watch_screen(_sample(64), "h", [], 80, 24), 80, 24)
    gpu_rows = [line for line in lines if line[:1].isdigit()]
    assert 10 <= len(gpu_rows) < 64
    assert f"{64 - len(gpu_rows)} of 64 rows of the GPU table" in " ".join(lines[-2:])


def _fixed_host_sample(root: Path, gpus: int) -> dyno_pb2.Sample:
    """The host sampler over a fixed /proc tree: two CPUs whose ticks advance between its two readings, no network
    device or disk. Not this machine's /proc: there CPU rows appear only when a tick falls between the readings and
    the devices are its own, so how much of the two-line note has room would vary from run to run."""
    (root / "net").mkdir()
    (root / "meminfo").write_text("MemTotal: 16000000 kB\nMemFree: 1000000 kB\nMemAvailable: 12000000 kB\n")
    (root / "net" / "dev").write_text("Inter-|   Receive  |  Transmit\n face |bytes packets|bytes packets\n")
    (root / "diskstats").write_text("")
    (root / "loadavg").write_text("1.50 0.75 0.25 3/456 7890\n")
    (root / "uptime").write_text("12345.67 23456.78\n")
    now = [1000.0]
    host = HostSampler(proc_root=root, clock=lambda: now[0])
    for ticks in (0, 100):
        cpus = {"cpu": 2 * ticks, "cpu0": ticks, "cpu1": ticks}
        (root / "stat").write_text("".join(f"{c} {500 + t} 0 {200 + t} {900 + t} 10 0 0 0\n" for c, t in cpus.items()))
        readings = tuple(host.sample())
        now[0] += 1.0
    return sample_message(Sample(1_796_000_000_000, readings + tuple(SimGpuSampler(gpus).sample())))


def test_with_names_every_matched_table_is_fitted(tmp_path: Path) -> None:
    sample = _fixed_host_sample(tmp_path, 8)
    assert {m.name for m in sample.metrics if m.labels.get("cpu") == "1"} >= {"cpu_user_percent", "cpu_idle_percent"}
    lines = _check(watch_screen(sample, "h", ["cpu_*", "gpu_*"], 80, 24), 80, 24)
    note = " ".join(lines[-2:])
    assert note.startswith("not shown (80x24): ") and "rows of the" in note and "column(s) of the" in note
    assert "rows of the cpu table" in note  # a matched table, fitted like the others


def test_a_screen_that_fits_says_nothing_left_out() -> None:
    block = Block(("GPU", "UTIL"), (("0", "50%"), ("1", "7%")), "GPU table", text=("GPU",))
    screen = fit_screen("title", [block], 80, 24)
    assert screen.splitlines() == ["title", "", "GPU  UTIL", "---  ----", "0     50%", "1      7%"]
