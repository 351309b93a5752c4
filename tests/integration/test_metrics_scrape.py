"""A real dynod's /metrics as a fleet's Prometheus sees it, parsed with prometheus_client's parser: every family
typed and described, a small fixed label set, simulated GPUs labelled, and the tracing side's state (registered
processes against max_processes, traces in flight, trace dir size against its limit), which only GetStatus had."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import wait_for

pytestmark = pytest.mark.integration

LABELS = {"host", "gpu", "uuid", "simulated", "cpu", "mode", "device", "reason", "sampler", "backend", "version"}


def _scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    families = list(text_string_to_metric_families(text))
    assert all(f.documentation and f.type in ("gauge", "counter", "info") for f in families)
    return {f.name: f.samples for f in families}


def _value(samples: dict[str, list], name: str) -> float:
    (sample,) = samples[name]
    return float(sample.value)


def test_scrape_has_the_daemon_state_and_only_bounded_labels(dynod_factory) -> None:
    d = dynod_factory("--max-processes", "7", gpu_backend="sim", sim_gpus=2)
    got = _scrape(d.metrics_url)
    assert _value(got, "dyno_registered_processes") == 0 and _value(got, "dyno_max_processes") == 7
    assert _value(got, "dyno_active_traces") == 0 and _value(got, "dyno_trace_dir_bytes") >= 0
    assert _value(got, "dyno_trace_retention_bytes") == 10 * 1024**3
    for name, samples in got.items():
        for s in samples:
            assert set(s.labels) <= LABELS, (name, s.labels)
            if name.startswith("dyno_gpu_"):
                assert s.labels["simulated"] == "true" and s.labels["uuid"].startswith("GPU-SIM-"), name
    assert [s.value for s in got["dyno_gpu_lost"]] == [0.0, 0.0]

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with grpc.insecure_channel(f"unix:{d.agent_socket}") as channel:
            request = agent_pb2.RegisterRequest(pid=sleeper.pid, job_id="scrape", gpu=-1)
            assert agent_pb2_grpc.AgentStub(channel).Register(request, timeout=10).session_id
        assert _value(_scrape(d.metrics_url), "dyno_registered_processes") == 1
    finally:
        sleeper.kill()
        sleeper.wait()
    # the process is gone: garbage collection drops it (idle housekeeping runs every 5 s) and the gauge follows
    wait_for(lambda: _value(_scrape(d.metrics_url), "dyno_registered_processes") == 0, timeout_s=30, interval_s=0.5)
