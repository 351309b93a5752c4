"""A real dynod (simulated GPUs) on loopback, driven through DynoClient, dyno-cli, health, reflection, /metrics."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from prometheus_client.parser import text_string_to_metric_families

from dyno.client import DynoClient
from dyno.client.errors import InvalidArgument, Unavailable

from conftest import run_cli, start_cli, wait_for

pytestmark = pytest.mark.integration


def test_status_reports_samplers_and_simulated_gpus(dynod):
    with DynoClient(dynod.target) as c:
        s = c.status()
    samplers = {st.name: st for st in s.samplers}
    assert samplers["host"].ok
    assert samplers["gpu"].ok and samplers["gpu"].simulated and samplers["gpu"].backend == "sim"
    assert [g.index for g in s.gpus] == [0, 1]
    assert all(g.simulated and g.memory_total_bytes > 0 for g in s.gpus)
    assert s.interval_s == pytest.approx(0.2)
    assert s.samples_in_history >= 1


def test_get_metrics_filter_limit_and_since(dynod):
    with DynoClient(dynod.target) as c:
        wait_for(lambda: c.status().samples_in_history >= 3)
        resp = c.metrics(["gpu_*"], limit=2)
        assert len(resp.samples) == 2
        assert resp.samples[0].timestamp_ms < resp.samples[1].timestamp_ms
        names = {m.name for m in resp.samples[-1].metrics}
        assert names and all(n.startswith("gpu_") for n in names)
        assert {m.labels["gpu"] for m in resp.samples[-1].metrics} == {"0", "1"}
        newest = resp.samples[-1].timestamp_ms
        assert all(s.timestamp_ms > newest for s in c.metrics(since_ms=newest).samples)
        host = c.metrics(["cpu_*"], limit=1).samples[-1]
        assert any(m.labels.get("cpu") == "total" for m in host.metrics)


def test_bad_arguments_name_the_field(dynod):
    with DynoClient(dynod.target) as c:
        with pytest.raises(InvalidArgument, match="limit"):
            c.metrics(limit=-1)
        with pytest.raises(InvalidArgument, match="since_ms"):
            c.metrics(since_ms=-5)


def test_stream_metrics_delivers_new_samples(dynod):
    with DynoClient(dynod.target) as c:
        stream = c.stream_metrics(["gpu_utilization_percent"])
        got = [next(stream) for _ in range(3)]
        stream.close()
    assert [s.timestamp_ms for s in got] == sorted({s.timestamp_ms for s in got})
    assert all({m.name for m in s.metrics} == {"gpu_utilization_percent"} for s in got)


def test_health_and_reflection(dynod):
    channel = grpc.insecure_channel(dynod.target)
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "dyno.v1.Dyno"):
        resp = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    db = ProtoReflectionDescriptorDatabase(channel)
    services = set(db.get_services())
    assert {"dyno.v1.Dyno", "grpc.health.v1.Health"} <= services
    desc = db.FindFileContainingSymbol("dyno.v1.Dyno")
    assert desc.package == "dyno.v1"
    channel.close()


def test_prometheus_scrape_parses(dynod):
    text = urllib.request.urlopen(dynod.metrics_url, timeout=5).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "dyno_gpu_utilization_ratio" in families
    gpu_samples = families["dyno_gpu_utilization_ratio"].samples
    assert {s.labels["gpu"] for s in gpu_samples} == {"0", "1"}
    assert all(s.labels["simulated"] == "true" and s.labels["host"] and s.labels["uuid"] for s in gpu_samples)
    cpu = families["dyno_cpu_seconds"]  # the parser names a counter without _total
    assert cpu.type == "counter" and "total" not in {s.labels["cpu"] for s in cpu.samples}
    up = {s.labels["sampler"]: s.value for s in families["dyno_sampler_up"].samples}
    assert up == {"host": 1.0, "gpu": 1.0}
    for fam in families.values():
        assert fam.documentation, f"{fam.name} has no HELP"
    promtool = shutil.which("promtool")
    if promtool:
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_cli_status_version_metrics(dynod):
    common = ["--host", "127.0.0.1", "--port", str(dynod.port)]
    r = run_cli("status", *common)
    assert r.returncode == 0, r.stderr
    assert "gpu" in r.stdout and "SIMULATED" in r.stdout and "host" in r.stdout
    r = run_cli("status", *common, "--json")
    status = json.loads(r.stdout)
    assert {s["name"] for s in status["samplers"]} == {"host", "gpu"}
    # dynolog's habit: options before the command, host given as --hostname
    r = run_cli("--hostname", "127.0.0.1", "--port", str(dynod.port), "status", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hostname"] == status["hostname"]
    r = run_cli("version", *common)
    assert r.returncode == 0 and "dyno.v1" in r.stdout
    r = run_cli("metrics", *common)
    assert r.returncode == 0, r.stderr
    assert "gpu_utilization_percent" in r.stdout and "gpu=0" in r.stdout
    r = run_cli("metrics", *common, "--json", "--limit", "2", "--names", "load_*")
    samples = json.loads(r.stdout)["samples"]
    assert len(samples) == 2 and all(m["name"].startswith("load_") for s in samples for m in s["metrics"])


def test_cli_metrics_watch_redraws(dynod):
    args = ("--host", "127.0.0.1", "--port", str(dynod.port), "--names", "gpu_power_watts")
    proc = start_cli("metrics", "--watch", *args, stderr=None)
    try:
        seen = 0
        for line in proc.stdout:  # type: ignore[union-attr]
            if "sample at" in line:
                seen += 1
                if seen == 2:
                    break
        assert seen == 2
    finally:
        proc.terminate()
        proc.wait(10)


def test_unreachable_daemon_is_one_line_exit_1():
    from conftest import free_port

    r = run_cli("status", "--host", "127.0.0.1", "--port", str(free_port()), "--timeout-s", "1")
    assert r.returncode == 1
    assert r.stderr.startswith("dyno-cli: error:") and "cannot reach dynod" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    with DynoClient(f"127.0.0.1:{free_port()}", timeout_s=0.5, retries=0) as c:
        with pytest.raises(Unavailable):
            c.status()


def test_sigterm_drains_and_exits_zero(dynod_factory):
    d = dynod_factory()
    with DynoClient(d.target) as c:
        assert c.health() == "SERVING"
    assert d.stop() == 0
    assert "shutting down" in d.log and "stopped" in d.log and "Traceback" not in d.log


def test_port_in_use_is_one_line_exit_1(dynod, dynod_factory):
    d = dynod_factory(start=False)
    d.args[d.args.index("--port") + 1] = str(dynod.port)
    r = subprocess.run([*_daemon_cmd(), *d.args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "cannot listen on" in r.stderr and "Traceback" not in r.stderr


def test_bad_config_and_flags_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("port = [1\n")
    r = subprocess.run([*_daemon_cmd(), "--config", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not valid TOML" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [*_daemon_cmd(), "--config", str(tmp_path / "missing.toml")], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and "cannot read config file" in r.stderr
    r = subprocess.run([*_daemon_cmd(), "--interval-s", "zero"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--interval-s" in r.stderr


def test_auto_backend_without_driver_runs_on(dynod_factory):
    d = dynod_factory(gpu_backend="auto")
    with DynoClient(d.target) as c:
        gpu = {s.name: s for s in c.status().samplers}["gpu"]
    if gpu.ok:  # a machine with an NVIDIA driver
        assert gpu.backend == "nvml" and not gpu.simulated
    else:
        assert gpu.reason and not gpu.simulated
        assert "gpu: unavailable" in d.log


def _daemon_cmd() -> list[str]:
    return [sys.executable, "-m", "dyno.daemon"]


def test_second_daemon_on_the_same_kineto_endpoint_says_what_to_do(dynod, dynod_factory):
    d = dynod_factory(start=False)
    d.args[d.args.index("--kineto-endpoint") + 1] = dynod.kineto_endpoint
    r = subprocess.run([*_daemon_cmd(), *d.args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "cannot bind kineto endpoint" in r.stderr and "--kineto-endpoint off" in r.stderr
    assert "Traceback" not in r.stderr and "[Errno" not in r.stderr


def test_cli_trace_unwritable_output_dir_fails_before_tracing(dynod, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    r = run_cli(
        "trace", "--host", dynod.target, "--job-id", "j", "--duration-ms", "100", "--output-dir", str(blocker / "sub")
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--output-dir {blocker / 'sub'}: cannot write there: Not a directory" in r.stderr
    assert list(dynod.trace_dir.iterdir()) == []  # checked before anything was traced
