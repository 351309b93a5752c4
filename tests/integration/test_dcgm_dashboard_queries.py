"""NVIDIA's Grafana dashboard for dcgm-exporter (tests/dcgm_reference/dcgm-exporter-dashboard.json) works on a dynod
with `--dcgm-metrics`: a real Prometheus server (/usr/bin/prometheus, loopback, its own config and storage dir,
1 s scrapes) scrapes a real dynod with simulated GPUs, and every query of the dashboard (its panels, and its template
variables as Grafana asks for them) returns data through Prometheus' HTTP API; so does rate() over dyno's own CPU
counter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, short_tmpdir, wait_for

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
DASHBOARD = Path(__file__).resolve().parents[1] / "dcgm_reference" / "dcgm-exporter-dashboard.json"


def _queries(node: Any) -> Iterator[str]:
    """Every PromQL expression of the dashboard: panel targets' `expr`, template variables' `query`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query") and isinstance(value, str):
                yield value
            else:
                yield from _queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)


class _Prometheus:
    def __init__(self, target: str) -> None:
        self.dir = short_tmpdir("dyno-prom-")
        self.port = free_port()
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: dynod\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "prometheus.log", "wb"),  # noqa: SIM115 - the child holds it
        )

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            assert self.proc.poll() is None, (self.dir / "prometheus.log").read_text()[-2000:]
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def prometheus_for() -> Iterator:
    started: list[_Prometheus] = []

    def start(target: str) -> _Prometheus:
        p = _Prometheus(target)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="no prometheus server (Debian package prometheus)")
def test_every_dashboard_query_returns_data_from_a_real_prometheus(dynod_factory, prometheus_for) -> None:
    dynod = dynod_factory("--dcgm-metrics", gpu_backend="sim", sim_gpus=2, interval_s=0.5)
    instance = f"127.0.0.1:{dynod.metrics_port}"
    prom = prometheus_for(instance)
    wait_for(prom.ready, timeout_s=30, interval_s=0.2)
    queries = sorted(set(_queries(json.loads(DASHBOARD.read_text()))) - {"prometheus"})  # the datasource query
    assert len(queries) >= 8
    wait_for(lambda: prom.api("query", query="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")["result"], timeout_s=30)
    for query in queries:
        if query.startswith("label_values("):  # a template variable: Grafana asks for the label's values
            metric, label = (part.strip() for part in query[len("label_values(") : -1].split(","))
            values = prom.api(f"label/{label}/values", **{"match[]": metric})
            assert values == ([instance] if label == "instance" else ["0", "1"]), query
            continue
        # the variables as Grafana fills them in with this instance and every GPU selected
        promql = query.replace("$instance", instance).replace("$gpu", "0|1")
        result = prom.api("query", query=promql)["result"]
        assert result, f"no data: {promql}"
        assert all(float(r["value"][1]) == float(r["value"][1]) for r in result), promql  # not NaN
    # the labels dcgm-exporter's users group and filter by, on every series
    for series in prom.api("series", **{"match[]": '{__name__=~"DCGM_.+"}'}):
        assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"} <= set(series), series
    targets = prom.api("targets")["activeTargets"]
    assert [t["health"] for t in targets] == ["up"], targets
    # dyno's own counters beside them: rate() over the CPU seconds of every CPU and mode counts the CPUs (once the
    # 10 s window is covered by scrapes: before, rate() extrapolates over the part it has)
    cpus = os.cpu_count() or 1

    def cpus_counted() -> float:
        result = prom.api("query", query="sum(rate(dyno_cpu_seconds_total[10s]))")["result"]
        return float(result[0]["value"][1]) if result else 0.0

    wait_for(lambda: 0.8 * cpus <= cpus_counted() <= 1.2 * cpus, timeout_s=30, interval_s=0.5)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (Debian package prometheus)")
def test_promtool_finds_only_dcgm_exporters_own_label_spellings(dynod_factory) -> None:
    dynod = dynod_factory("--dcgm-metrics", gpu_backend="sim", sim_gpus=2)
    text = wait_for(
        lambda: (t := urllib.request.urlopen(dynod.metrics_url, timeout=5).read().decode()) * ("DCGM_" in t)
    )
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    problems = [line for line in (check.stdout + check.stderr).splitlines() if line.strip()]
    assert problems  # modelName and UUID are camelCase: what dcgm-exporter's own users already get from promtool
    for line in problems:
        assert line.startswith("DCGM_") and line.endswith(
            "label names should be written in 'snake_case' not 'camelCase'"
        )
