"""`dyno-cli jobs --prometheus` against a real Prometheus server (/usr/bin/prometheus on a loopback port, 1 s
scrapes) of two real dynods with simulated GPUs and agent-registered processes of two jobs (one on both hosts):
its table agrees with `dyno-cli jobs --hosts` within 1% + 0.001 GPU-hours (docs/JOBS.md), once the jobs ended
(their final totals are exported for 5 minutes, and Prometheus has them within a scrape)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_server import PROMETHEUS, prometheus_servers

from conftest import Dynod, run_cli, wait_for

pytestmark = pytest.mark.integration
# registered by the agent without torch: the subject is the accounting, and torch's import would be most of a start
TRAINER = Path(__file__).resolve().parent / "trainers" / "registered_idler.py"


@pytest.fixture
def prometheus_for() -> Iterator[Callable[[list[str]], str]]:
    with prometheus_servers() as start:
        yield start


def _trainer(d: Dynod, job: str, local_rank: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job, "LOCAL_RANK": str(local_rank)}
    cmd = [sys.executable, str(TRAINER), "--seconds", "300", "--step-sleep", "0.01"]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )


def _table(*args: str) -> dict[str, dict]:
    done = run_cli("jobs", "--json", *args)
    assert done.returncode == 0, done.stderr
    return {j["job_id"]: j for j in json.loads(done.stdout)["jobs"]}


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed (Debian package prometheus)")
def test_jobs_from_prometheus_agree_with_the_daemons(dynod_factory, prometheus_for) -> None:
    flags = ("--job-flush-s", "1", "--job-grace-s", "2")
    hosts = [dynod_factory(*flags, interval_s=0.5, sim_gpus=2) for _ in range(2)]
    url = prometheus_for([f"127.0.0.1:{d.metrics_port}" for d in hosts])
    wide, narrow = f"wide-{uuid.uuid4().hex[:6]}", f"narrow-{uuid.uuid4().hex[:6]}"
    trainers = [_trainer(hosts[0], wide, 0), _trainer(hosts[1], wide, 0), _trainer(hosts[0], narrow, 1)]
    targets = ",".join(d.target for d in hosts)
    try:
        wait_for(lambda: (t := _table("--hosts", targets)).get(wide, {}).get("gpu_hours", 0) * 3600 > 8 * 2
                 and t.get(narrow, {}).get("gpu_hours", 0) * 3600 > 8, 180, 1.0)  # fmt: skip
        live = _table("--prometheus", url, "--running")
        assert {wide, narrow} <= set(live)  # running jobs, as Prometheus sees them now
    finally:
        for t in trainers:
            t.kill()
            t.wait(10)
    # ended on both hosts (grace 2 s), then a scrape later Prometheus has the final totals (and says ended)
    wait_for(
        lambda: not any(j["job_id"] in (wide, narrow) for j in _table("--hosts", targets, "--running").values()),
        60,
        0.5,
    )
    wait_for(
        lambda: not any(j["job_id"] in (wide, narrow) for j in _table("--prometheus", url, "--running").values()),
        30,
        0.5,
    )
    daemons = _table("--hosts", targets)
    prom = _table("--prometheus", url)
    for job in (wide, narrow):
        a, b = daemons[job], prom[job]
        assert a["hosts"] == b["hosts"] and a["host_count"] == b["host_count"] and a["gpus"] == b["gpus"]
        assert a["host_count"] == (2 if job == wide else 1)
        for key in ("gpu_hours", "wasted_gpu_hours"):
            assert abs(a[key] - b[key]) <= 0.01 * a[key] + 0.001, (job, key, a[key], b[key])
        assert abs(a["busy_fraction"] - b["busy_fraction"]) <= 0.01
        assert abs(a["start_ms"] - b["start_ms"]) <= 1
        assert a["running"] is False and b["running"] is False
        assert a["simulated"] is True and b["simulated"] is True
    assert [j for j in prom if j in (wide, narrow)] == [j for j in daemons if j in (wide, narrow)]  # same ranking
