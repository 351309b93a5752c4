"""`dyno-cli status` text: a simulated GPU is labelled once, whether or not its name already says so; the job store
and periodic profiling lines say the daemon's words, and are absent from a daemon without them; uptimes and ages read
as durations."""

from __future__ import annotations

import pytest

from dyno.client.cluster import HostResult
from dyno.client.commands import ps, status
from dyno.client.commands.status import render
from dyno.client.format import format_value, human_duration
from dyno.client.hosts import Host
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", ["NVIDIA H100 80GB HBM3 (simulated)", "Sim GPU"])
def test_a_simulated_gpu_is_labelled_once(name: str) -> None:
    status = dyno_pb2.Status(gpus=[dyno_pb2.GpuInfo(index=0, name=name, uuid="GPU-SIM-0", simulated=True)])
    line = next(ln for ln in render(status, "localhost:1778").splitlines() if "GPU-SIM-0" in ln)
    assert line.lower().count("simulated") == 1


def test_a_real_gpu_is_not_labelled() -> None:
    status = dyno_pb2.Status(gpus=[dyno_pb2.GpuInfo(index=0, name="NVIDIA A100", uuid="GPU-1")])
    line = next(ln for ln in render(status, "localhost:1778").splitlines() if "GPU-1" in ln)
    assert "simulated" not in line.lower()


def _lines(status: dyno_pb2.Status, prefix: str) -> list[str]:
    return [ln for ln in render(status, "localhost:1778").splitlines() if ln.startswith(prefix)]


def test_job_store_line_says_ok_or_the_problem() -> None:
    assert _lines(dyno_pb2.Status(job_store="ok"), "job store") == ["job store   ok"]
    problem = "job database /var/lib/dyno/jobs.sqlite3: cannot open it: file is not a database (corrupt: move it aside)"
    assert _lines(dyno_pb2.Status(job_store=problem), "job store") == [f"job store   {problem}"]
    assert _lines(dyno_pb2.Status(), "job store") == []


def test_periodic_line_says_off_or_the_schedule() -> None:
    assert _lines(dyno_pb2.Status(periodic_profiling="off"), "periodic") == ["periodic    off"]
    on = "on: every 1800 s at a per-job offset, 5 steps (agent) ...; next: train-7 at 02:17:43Z"
    assert _lines(dyno_pb2.Status(periodic_profiling=on), "periodic") == [f"periodic    {on}"]
    assert _lines(dyno_pb2.Status(), "periodic") == []  # a dynod from before periodic profiling


# Uptimes and ages read at a glance


_MONTH_S = 30 * 86400 + 4 * 3600 + 59


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (-3, "0s"), (45.7, "45s"), (119, "119s"), (125, "2m05s"), (7199, "119m59s"), (7200, "2h00m")]
    + [(47 * 3600 + 59 * 60, "47h59m"), (_MONTH_S, "30d04h")],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_status_shows_a_months_uptime_in_days() -> None:
    s = dyno_pb2.Status(hostname="gpu7", version="1", uptime_s=_MONTH_S)
    assert "up 30d04h" in status.render(s, "gpu7:1778")
    table = status.render_many([HostResult(Host("gpu7", 1778), True, s)])
    assert "30d04h" in table and "2592" not in table


def test_ps_shows_a_stale_process_age_in_days() -> None:
    now_ms = 10**13
    p = dyno_pb2.ProcessInfo(pid=42, job_id="j", last_seen_ms=now_ms - 3 * 86400 * 1000)
    resp = dyno_pb2.ListProcessesResponse(processes=[p])
    assert "3d00h ago" in ps.render([HostResult(Host("gpu7", 1778), True, resp)], now_ms=now_ms)


def test_metrics_show_the_host_uptime_as_a_duration() -> None:
    """`dyno-cli metrics` prints host_uptime_seconds as a duration."""
    assert format_value("host_uptime_seconds", 57740.0) == "16h02m"
    assert format_value("gpu_energy_joules", 57740.5) == "5.774e+04"  # other values as before
