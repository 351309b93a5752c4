"""The /metrics app (dyno.daemon.exposition) answers exactly what prometheus_client's make_wsgi_app answers for the
same registry: every content type Prometheus, promtool and curl negotiate, gzip, `name[]`, OPTIONS, 405 and
/favicon.ico, over dynod's real series (host counters, simulated GPUs, the DCGM view, the daemon's gauges), label
values that need escaping, and families the fast encoders leave to prometheus_client."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from dyno.daemon.exposition import LabelCache, encode_openmetrics, encode_text, make_app
from dyno.daemon.history import History, Sample
from dyno.daemon.prometheus import DAEMON_GAUGES, DynoCollector, ExporterInfo, build_registry, daemon_gauges
from dyno.daemon.samplers.base import GpuDevice, SamplerState
from dyno.daemon.samplers.gpu_sim import SimGpuSampler
from dyno.daemon.samplers.host import HostSampler

pytestmark = pytest.mark.unit

ACCEPTS = [
    None,
    "text/plain",
    "text/plain;version=0.0.4",
    "text/plain;version=1.0.0",
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",  # Prometheus 2.x
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",  # left to prometheus_client
    "application/openmetrics-text;version=0.0.1",
]


def _registry(tmp_path: Path, extra: list[Any]) -> Any:
    (tmp_path / "net").mkdir()
    (tmp_path / "stat").write_text("cpu 10 0 5 80 5 0 0 0 0 0\ncpu0 10 0 5 80 5 0 0 0 0 0\n")
    (tmp_path / "meminfo").write_text("MemTotal: 16000000 kB\nMemAvailable: 12000000 kB\n")
    (tmp_path / "net" / "dev").write_text("h\nh\n  eth0: 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n")
    (tmp_path / "diskstats").write_text(" 8 0 sda 1 0 2 0 3 0 4 0 0 5 0 0 0 0 0 0 0\n")
    (tmp_path / "loadavg").write_text("1.50 0.75 0.25 3/456 7890\n")
    (tmp_path / "uptime").write_text("12345.67 23456.78\n")
    host = HostSampler(proc_root=tmp_path, clock=lambda: 1.0)
    now = [50.0]
    sim = SimGpuSampler(2, clock=lambda: now[0])
    sim.sample()
    now[0] += 1.0
    history = History(4)
    history.append(Sample(1_700_000_000_000, tuple(host.sample() + sim.sample())))
    devices = [
        GpuDevice(0, 'odd "name" \\ with\nnewline', "GPU-SIM-0", 1, "00000000:18:00.0"),
        *sim.inventory()[1:],
    ]
    states = [SamplerState("host", True, "procfs"), SamplerState("gpu", True, "sim", simulated=True)]
    collector = DynoCollector(
        history,
        ExporterInfo('node "1"', "0.1.0"),
        lambda: states,
        extra=lambda: [*daemon_gauges("node1", dict.fromkeys(DAEMON_GAUGES, 7.0)), *extra],
        totals=host.totals,
        dcgm_devices=lambda: devices,
    )
    return build_registry(collector)


def _call(app: Any, method: str = "GET", path: str = "/metrics", **environ: str) -> tuple[str, dict, bytes]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, dict(headers)

    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", **environ}
    body = b"".join(app(env, start_response))
    if answer["headers"].get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)  # the gzip header holds the time: compare what it holds
    return answer["status"], answer["headers"], body


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", ["", "name%5B%5D=dyno_cpu_seconds_total&name%5B%5D=DCGM_FI_DEV_GPU_UTIL"])
@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_scrapes_are_byte_for_byte_prometheus_clients(tmp_path: Path, accept: str | None, query: str, encoding: str):
    registry = _registry(tmp_path, [])
    env = {"QUERY_STRING": query, "HTTP_ACCEPT_ENCODING": encoding}
    if accept is not None:
        env["HTTP_ACCEPT"] = accept
    ours, theirs = _call(make_app(registry), **env), _call(make_wsgi_app(registry), **env)
    assert ours == theirs
    assert b"DCGM_FI_DEV_GPU_UTIL" in ours[2] and b'odd \\"name\\" \\\\ with\\nnewline' in ours[2]
    assert (b"dyno_build_info" in ours[2]) == (query == "")
    _call(make_app(registry), **env)  # a second scrape, from the label cache
    assert _call(make_app(registry), **env) == theirs


def test_other_requests_and_families_the_fast_encoders_leave_alone(tmp_path: Path):
    with_unit = GaugeMetricFamily("dyno_test_seconds", "has a unit", value=1.0, unit="seconds")
    registry = _registry(tmp_path, [with_unit])
    ours, theirs = make_app(registry), make_wsgi_app(registry)
    for method, path in (("OPTIONS", "/metrics"), ("POST", "/metrics"), ("GET", "/favicon.ico"), ("GET", "/x")):
        assert _call(ours, method, path) == _call(theirs, method, path)
    prom = "application/openmetrics-text;version=1.0.0"
    assert _call(ours, HTTP_ACCEPT=prom) == _call(theirs, HTTP_ACCEPT=prom)
    assert b"# UNIT dyno_test_seconds seconds" in _call(ours, HTTP_ACCEPT=prom)[2]


def test_the_fast_encoders_cover_every_family_dynod_serves(tmp_path: Path):
    registry = _registry(tmp_path, [])  # host counters, simulated GPUs, DCGM view, daemon gauges, build info
    labels = LabelCache()
    assert encode_text(registry.collect(), labels) == generate_latest(registry)
    assert encode_openmetrics(registry.collect(), labels) == generate_openmetrics(registry)
