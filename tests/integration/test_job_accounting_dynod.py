"""Job accounting in a real dynod with simulated GPUs and processes registered by the agent (without torch: the
subject is the accounting): ListJobs over gRPC, the simulated utilization following each process's CPU share, the
DCGM-compatible view's hpc_job, a SIGKILL and restart that resume the record."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, wait_for

pytestmark = pytest.mark.integration
TRAINER = Path(__file__).resolve().parent / "trainers" / "registered_idler.py"


def _trainer(d: Dynod, job: str, local_rank: str, step_sleep: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DYNO_AGENT_SOCKET": str(d.agent_socket),
        "DYNO_JOB_ID": job,
        "RANK": local_rank,
        "LOCAL_RANK": local_rank,
        "WORLD_SIZE": "2",
    }
    cmd = [sys.executable, str(TRAINER), "--seconds", "300", "--step-sleep", step_sleep]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )


def _jobs(d: Dynod, **request: object) -> dyno_pb2.ListJobsResponse:
    stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))
    return stub.ListJobs(dyno_pb2.ListJobsRequest(**request), timeout=10)  # type: ignore[arg-type]


def _job(d: Dynod, job: str, min_gpu_s: float) -> dyno_pb2.JobRecord | None:
    found = [j for j in _jobs(d, job_id=job).jobs if j.gpu_seconds >= min_gpu_s]
    return found[0] if found else None


def _hpc_jobs(d: Dynod) -> dict[str, set[str]]:
    """gpu -> the hpc_job labels of its DCGM_FI_DEV_GPU_UTIL series on dynod's /metrics."""
    text = urllib.request.urlopen(d.metrics_url, timeout=10).read().decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "DCGM_FI_DEV_GPU_UTIL":
            for sample in family.samples:
                out.setdefault(sample.labels["gpu"], set()).add(sample.labels.get("hpc_job", ""))
    return out


def test_list_jobs_of_two_trainers_and_a_sigkill_restart_resumes_the_record(dynod_factory) -> None:
    d = dynod_factory("--job-flush-s", "1", "--job-grace-s", "30", "--dcgm-metrics", interval_s=0.2, sim_gpus=2)
    busy, starved = f"busy-{uuid.uuid4().hex[:6]}", f"starved-{uuid.uuid4().hex[:6]}"
    procs = [_trainer(d, busy, "1", "0"), _trainer(d, starved, "0", "0.2")]
    try:
        b = wait_for(lambda: _job(d, busy, 3.0), 120, 0.5)
        s = wait_for(lambda: _job(d, starved, 3.0), 120, 0.5)
        assert list(b.gpu_indices) == [1] and list(s.gpu_indices) == [0]  # LOCAL_RANK
        assert b.running and b.simulated and b.source == "registered" and b.user
        # the DCGM-compatible view names the job holding each GPU (dcgm-exporter's hpc_job)
        assert wait_for(lambda: _hpc_jobs(d) == {"0": {starved}, "1": {busy}}, 30, 0.5)
        assert b.pid_count >= 1 and procs[0].pid in b.pids
        # the simulated GPU follows its trainer's CPU share (read every CPU_EVERY_S): a trainer sleeping between
        # steps leaves its GPU less used than one that never sleeps, compared over a stretch after the first readings
        # (by how much depends on the machine's load: no margin asserted); 8 s holds at least one CPU reading
        b1, s1 = wait_for(lambda: _job(d, busy, 8.0), 60, 0.5), wait_for(lambda: _job(d, starved, 8.0), 60, 0.5)
        b2 = wait_for(lambda: _job(d, busy, b1.gpu_seconds + 8.0), 60, 0.5)
        s2 = wait_for(lambda: _job(d, starved, s1.gpu_seconds + 8.0), 60, 0.5)
        busy_share = (b2.busy_gpu_seconds - b1.busy_gpu_seconds) / (b2.gpu_seconds - b1.gpu_seconds)
        starved_share = (s2.busy_gpu_seconds - s1.busy_gpu_seconds) / (s2.gpu_seconds - s1.gpu_seconds)
        assert busy_share > starved_share
        assert b2.cpu_seconds - b1.cpu_seconds > s2.cpu_seconds - s1.cpu_seconds
        stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))
        assert stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=5).job_store == "ok"
        # a trace of the job counts for it (the trace manager's callback)
        started = stub.StartTrace(dyno_pb2.TraceRequest(job_id=busy, duration_ms=200), timeout=10)
        assert list(started.triggered)
        assert wait_for(lambda: (j := _job(d, busy, 0.0)) is not None and j.traces == 1, 30, 0.5)
        assert [j.job_id for j in _jobs(d, user="no-such-user").jobs] == []
        page = _jobs(d, page_size=1)
        assert len(page.jobs) == 1 and page.next_page_token
        rest = _jobs(d, page_size=1, page_token=page.next_page_token)
        assert {page.jobs[0].job_id, *(j.job_id for j in rest.jobs)} == {busy, starved}
        # the columnar form (what dyno-cli jobs asks for): the same records as columns, running ones included
        columns = _jobs(d, columnar=True, job_id=busy)
        assert columns.HasField("columns") and not columns.jobs and list(columns.columns.job_id) == [busy]
        assert list(columns.columns.running) == [True] and columns.columns.gpu_seconds[0] > 0

        before = wait_for(lambda: _job(d, busy, 10.0), 60, 0.5)
        d.kill()  # SIGKILL: nothing flushed at exit
        d.start()
        after = wait_for(lambda: _job(d, busy, 0.0), 30, 0.2)
        assert after.record_id == before.record_id and after.first_seen_ms == before.first_seen_ms
        assert after.gpu_seconds >= before.gpu_seconds - 1.0 - 0.5  # at most one flush (1 s) lost, and a tick
        assert len(_jobs(d, job_id=busy).jobs) == 1  # resumed, not a second record
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


def test_a_corrupt_job_database_leaves_dynod_serving_and_says_so(dynod_factory) -> None:
    d = dynod_factory(start=False)
    state = d.dir / "state"
    state.mkdir(parents=True)
    (state / "jobs.sqlite3").write_bytes(b"not a database at all " * 100)
    d.start()
    stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))
    status = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=5)
    assert "corrupt: move it aside" in status.job_store
    answer = stub.ListJobs(dyno_pb2.ListJobsRequest(), timeout=5)
    assert answer.store_problem == status.job_store and list(answer.jobs) == []
    assert d.log.count("job database") == 1  # logged once
    assert stub.GetMetrics(dyno_pb2.GetMetricsRequest(), timeout=5).samples  # still sampling
