"""Host-side analysis in a real dynod with real CPU torch trainers registered through the agent: an on-demand trace
is analysed on the host (GetTraceSummary DONE with rules and ranks, ListJobs' latest_analysis, the Prometheus
gauges) without dynod loading numpy; a worker SIGKILLed mid-analysis and a trainer whose trace file is garbage give
FAILED summaries with their reasons, and dynod stays healthy; traces that finished while analysis was off, more
than the queue's places, are all analysed once dynod restarts with it on, without being asked for. One dynod and
one trainer for the module (the last test restarts the dynod)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dyno.trace_layout import RECORD_NAME
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINERS = Path(__file__).resolve().parent / "trainers"
WORKER_MODULE = b"dyno.daemon.analysis.worker_main"


@pytest.fixture(scope="module")
def dynod() -> Iterator[Dynod]:
    d = Dynod(["--job-flush-s", "1", "--analysis-timeout-s", "120"]).start()
    yield d
    d.close()


def _stub(d: Dynod) -> dyno_pb2_grpc.DynoStub:
    return dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))


def _job_record(dynod: Dynod, job: str, trace_id: str) -> dyno_pb2.JobRecord:
    """The job's record once ListJobs carries the trace's analysis as its latest (within 30 s)."""
    return wait_for(
        lambda: next(
            (
                j
                for j in _stub(dynod).ListJobs(dyno_pb2.ListJobsRequest(job_id=job), timeout=10).jobs
                if j.latest_analysis.trace_id == trace_id
            ),
            None,
        ),
        30,
        0.5,
    )


def _trainer(d: Dynod, job: str, hostile_while: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job, "RANK": "0"}
    script = str(TRAINERS / "hostile_export_trainer.py")
    cmd = [sys.executable, script, "--hostile-while", str(hostile_while), "--explicit", "--seconds", "300"]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )


def _traced(d: Dynod, job: str, proc: subprocess.Popen[bytes]) -> str:
    """An iteration trace of the job's trainer (registered first); its id once every process ended."""
    stub = _stub(d)
    wait_for(
        lambda: any(
            p.pid == proc.pid for p in stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=5).processes
        ),
        90,
        0.2,
    )
    started = stub.StartTrace(dyno_pb2.TraceRequest(job_id=job, iterations=3), timeout=10)
    assert len(started.triggered) == 1, started
    wait_for(lambda: stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), timeout=5).finished, 90, 0.2)
    return started.trace_id


def _summary(d: Dynod, trace_id: str, parts: bool = False) -> dyno_pb2.TraceSummary:
    request = dyno_pb2.GetTraceSummaryRequest(trace_id=trace_id, include_rank_parts=parts)
    return _stub(d).GetTraceSummary(request, timeout=10)


def _finished(d: Dynod, trace_id: str) -> dyno_pb2.TraceSummary:
    done = (dyno_pb2.ANALYSIS_STATE_DONE, dyno_pb2.ANALYSIS_STATE_FAILED)
    return wait_for(lambda: (s := _summary(d, trace_id)).state in done and s, 120, 0.2)


def _healthy(d: Dynod) -> None:
    assert _stub(d).GetStatus(dyno_pb2.GetStatusRequest(), timeout=10).hostname


def _maps_numpy(pid: int) -> list[str]:
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if "numpy" in line or "trace_analysis/_native" in line]


@pytest.fixture(scope="module")
def trainer(dynod: Dynod) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """One trainer for the module; its trace files are garbage while dynod.dir / "hostile" exists."""
    job = f"analysed-{uuid.uuid4().hex[:6]}"
    proc = _trainer(dynod, job, dynod.dir / "hostile")
    yield job, proc
    proc.kill()
    proc.wait()


def test_an_on_demand_trace_is_analysed_on_the_host_and_served_without_numpy_in_dynod(dynod: Dynod, trainer) -> None:  # type: ignore[no-untyped-def]
    job, proc = trainer
    trace_id = _traced(dynod, job, proc)
    s = _finished(dynod, trace_id)
    assert s.state == dyno_pb2.ANALYSIS_STATE_DONE, s.failure_message
    assert (s.trace_id, s.job_id, s.hostname, s.periodic) == (
        trace_id,
        job,
        _stub(dynod).GetStatus(dyno_pb2.GetStatusRequest(), timeout=5).hostname,
        False,
    )
    assert s.user and s.trace_finished_ms > 0 and s.analyzed_ms >= s.trace_finished_ms and s.analysis_cpu_s > 0
    assert len(s.ranks) == 1 and s.ranks[0].steps >= 1 and s.ranks[0].mean_step_us > 0
    assert s.rules and all(0 <= r.time_lost_share <= 1 and r.rule for r in s.rules)
    assert not s.rank_parts
    with_parts = _summary(dynod, trace_id, parts=True)
    assert with_parts.rank_parts[:2] == b"\x1f\x8b" and len(with_parts.rank_parts) <= 3 * 2**20
    # ListJobs carries it as the job's latest analysis, bounded and without parts
    record = _job_record(dynod, job, trace_id)
    assert record.latest_analysis.state == dyno_pb2.ANALYSIS_STATE_DONE and not record.latest_analysis.rank_parts
    # the gauges beside the job's series
    text = urllib.request.urlopen(dynod.metrics_url, timeout=10).read().decode()
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    stamps = [x for x in families["dyno_job_analysis_timestamp_seconds"] if x.labels["job_id"] == job]
    assert [x.value for x in stamps] == [s.analyzed_ms / 1000]
    lost = {
        x.labels["rule"]: x.value for x in families["dyno_job_analysis_time_lost_ratio"] if x.labels["job_id"] == job
    }
    assert lost == pytest.approx({r.rule: min(1.0, r.time_lost_share) for r in s.rules})
    assert _maps_numpy(dynod.pid) == []  # the worker imported numpy; dynod never did
    with pytest.raises(grpc.RpcError) as unknown:
        _summary(dynod, "no-such-trace")
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def _workers(parent: int) -> list[int]:
    """Pids of `parent`'s running analysis workers (their command lines name the worker module)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    if ppid == parent and WORKER_MODULE in f.read():
                        found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
    return found


def _kill_workers(parent: int, stop: threading.Event, killed: list[int]) -> None:
    """Until `stop`: SIGKILL each analysis worker of `parent` as soon as it shows (noted in `killed`)."""
    while not stop.is_set():
        for pid in _workers(parent):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.01)  # ample against a worker that lives ~0.4 s


def test_a_worker_killed_mid_analysis_is_crashed_and_dynod_stays_healthy(dynod: Dynod, trainer) -> None:  # type: ignore[no-untyped-def]
    job, proc = trainer
    killed: list[int] = []
    for _ in range(5):  # the analysis takes a fraction of a second: a trace analysed before a kill is taken again
        stop = threading.Event()
        # watching from before the trace: its analysis may be over before GetTrace, polled, says it finished
        killer = threading.Thread(target=_kill_workers, args=(dynod.pid, stop, killed), daemon=True)
        killer.start()
        try:
            trace_id = _traced(dynod, job, proc)
            s = _finished(dynod, trace_id)
        finally:
            stop.set()
            killer.join()
        if killed:
            break
    assert killed
    assert (s.state, s.failure) == (dyno_pb2.ANALYSIS_STATE_FAILED, dyno_pb2.ANALYSIS_FAILURE_CRASHED)
    assert "killed by SIGKILL" in s.failure_message
    _healthy(dynod)
    record = _job_record(dynod, job, trace_id)
    assert record.latest_analysis.failure == dyno_pb2.ANALYSIS_FAILURE_CRASHED


def test_a_garbage_trace_file_is_a_failed_analysis_naming_it_and_dynod_stays_healthy(dynod: Dynod, trainer) -> None:  # type: ignore[no-untyped-def]
    job, proc = trainer
    (dynod.dir / "hostile").touch()
    try:
        trace_id = _traced(dynod, job, proc)
    finally:
        (dynod.dir / "hostile").unlink()
    s = _finished(dynod, trace_id)
    assert (s.state, s.failure) == (dyno_pb2.ANALYSIS_STATE_FAILED, dyno_pb2.ANALYSIS_FAILURE_NO_TRACE)
    assert trace_id in s.failure_message and "no trace could be analysed" in s.failure_message
    _healthy(dynod)


def test_traces_finished_while_analysis_was_off_are_all_analysed_at_the_next_start(dynod: Dynod, trainer) -> None:  # type: ignore[no-untyped-def]
    """Three traces, more than the queue's one place: all three analysed from the backlog, one at a time."""
    job, proc = trainer
    dynod.args.append("--no-analysis-enabled")
    try:
        dynod.restart()
        trace_ids = [_traced(dynod, job, proc) for _ in range(3)]  # once the trainer's agent has registered
        for trace_id in trace_ids:
            wait_for((dynod.trace_dir / trace_id / RECORD_NAME).is_file, 10, 0.05)
        assert _summary(dynod, trace_ids[-1]).state == dyno_pb2.ANALYSIS_STATE_DISABLED
    finally:
        dynod.args.remove("--no-analysis-enabled")
    dynod.args += ["--analysis-queue", "1"]
    try:
        dynod.restart()
        # nothing asks for their summaries: the job's record gets the newest as its latest analysis
        record = _job_record(dynod, job, trace_ids[-1])
        assert record.latest_analysis.state == dyno_pb2.ANALYSIS_STATE_DONE, record.latest_analysis.failure_message
        found = r"analysis: 3 finished trace\(s\) without an analysis, of \d+ trace record\(s\) read in "
        assert re.search(found, dynod.log)
        done = r"analysis: the backlog is done: the 3 trace\(s\) found at start are analysed"
        wait_for(lambda: re.search(done, dynod.log), 60, 0.2)
        # analysed already: GetTraceSummary finds each stored (a trace without one would be queued now, PENDING)
        assert [_summary(dynod, t).state for t in trace_ids] == [dyno_pb2.ANALYSIS_STATE_DONE] * 3
    finally:
        del dynod.args[-2:]
