"""status / version / metrics across several real daemons, one of them dead: one table, exit 3 (partial)."""

from __future__ import annotations

import json

import pytest

from conftest import free_port, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def two_daemons(dynod_factory):
    return dynod_factory(sim_gpus=2), dynod_factory(sim_gpus=1)


def test_status_and_metrics_across_hosts(two_daemons):
    a, b = two_daemons
    hosts = f"{a.target},{b.target}"
    r = run_cli("status", "--hosts", hosts)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["HOST", "VERSION", "UP", "GPUS"]
    assert any(a.target in ln and " 2 " in f" {ln} " for ln in lines) and any(b.target in ln for ln in lines)
    r = run_cli("metrics", "--hosts", hosts)
    assert r.returncode == 0, r.stderr
    gpu_rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("127.0.0.1") and "%" in ln]
    assert {(row[0], row[1]) for row in gpu_rows if len(row) > 6} >= {(a.target, "0"), (a.target, "1"), (b.target, "0")}
    r = run_cli("metrics", "--hosts", hosts, "--json", "--names", "gpu_power_watts")
    data = json.loads(r.stdout)
    assert {d["host"] for d in data} == {a.target, b.target}


def test_dead_host_gives_partial_exit_3(two_daemons):
    a, b = two_daemons
    dead = f"127.0.0.1:{free_port()}"
    r = run_cli("status", "--hosts", f"{a.target},{dead},{b.target}", "--timeout-s", "2")
    assert r.returncode == 3
    assert a.target in r.stdout and b.target in r.stdout
    assert f"dyno-cli: error: {dead}: cannot reach dynod" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("version", "--hosts", dead, "--timeout-s", "1")
    assert r.returncode == 1
