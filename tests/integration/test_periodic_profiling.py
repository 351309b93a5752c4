"""Periodic profiling end to end: two real dynods (periodic_interval_s 4 s, jobs older than 1 s), each with a real
agent-instrumented CPU torch trainer of one job. Both hosts trace the job at the same moment under the same
periodic-<job>-<UTC> trace id, which `dyno-cli fetch --trace-id` gathers from both; a dynod started over a host's
periodic traces resumes their budget; an on-demand trace started while a periodic one records in the same process
wins (the periodic part is cancelled, PREEMPTED_BY_ON_DEMAND)."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from two_host_job import Job, two_host_job

from dyno.daemon.profiling.schedule import Schedule
from dyno.trace_layout import RECORD_NAME
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, run_cli, short_tmpdir, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

INTERVAL_S = 4
# ~150 steps of >= 10 ms: a periodic trace records ~2 s, long enough to start an on-demand one meanwhile
PERIODIC = (
    "--periodic-interval-s", str(INTERVAL_S), "--periodic-min-job-age-s", "1", "--periodic-iterations", "150",
    "--periodic-duration-ms", "500", "--periodic-budget", "1",
)  # fmt: skip


@pytest.fixture(scope="module")
def job() -> Iterator[Job]:
    with two_host_job("periodic", ddp=False, dynod_args=PERIODIC) as j:
        yield j


def _stub(d: Dynod, job: Job, ch: grpc.Channel) -> tuple[dyno_pb2_grpc.DynoStub, list[tuple[str, str]]]:
    meta = [("authorization", f"Bearer {job.token.read_text().strip()}")] if d is job.locked else []
    return dyno_pb2_grpc.DynoStub(ch), meta


def _trace(d: Dynod, job: Job, trace_id: str) -> dyno_pb2.TraceStatus | None:
    with grpc.insecure_channel(d.target) as ch:
        stub, meta = _stub(d, job, ch)
        try:
            return stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=trace_id), timeout=5, metadata=meta)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise


def _periodic_ids(d: Dynod) -> set[str]:
    return {p.name for p in d.trace_dir.iterdir() if p.name.startswith("periodic-")} if d.trace_dir.is_dir() else set()


def _next_trace_id(job: Job, after_s: float = 0.0) -> tuple[str, float]:
    """The id of the job's next periodic trace at least `after_s` from now, and its moment (unix s)."""
    s = Schedule(INTERVAL_S * 1000)
    moment = s.next_moment(job.job_id, int((time.time() + after_s) * 1000))
    return s.trace_id(job.job_id, moment), moment / 1000


def test_both_hosts_trace_the_same_moment_and_fetch_gathers_them(job: Job) -> None:
    shared: set[str] = set()

    def after_the_first(ids: set[str]) -> set[str]:
        # a daemon takes the moment it finds a new job at, late by design (its scan pass; on a loaded machine
        # seconds): the moments after that one are on time
        return set(sorted(ids)[1:])

    def both_done() -> bool:
        common = after_the_first(_periodic_ids(job.open)) & after_the_first(_periodic_ids(job.locked))
        for tid in sorted(common):
            views = [_trace(d, job, tid) for d in job.daemons]
            if all(v is not None and v.finished and v.processes[0].state == dyno_pb2.TRACE_STATE_DONE for v in views):
                shared.add(tid)
        return bool(shared)

    wait_for(both_done, 60, 0.3)
    trace_id = min(shared)
    assert trace_id.startswith(f"periodic-{job.job_id}-") and trace_id.endswith("Z")
    # both hosts requested it at the job's moment (the wall clock, no coordination), not a pass later
    schedule = Schedule(INTERVAL_S * 1000)
    for d in job.daemons:
        view = _trace(d, job, trace_id)
        assert view is not None and view.request.iterations == 150
        moment = schedule.moment_at_or_before(job.job_id, view.created_ms)
        assert schedule.trace_id(job.job_id, moment) == trace_id
        assert 0 <= view.created_ms - moment < 1000, (d.target, view.created_ms - moment)
    # the status of each daemon says periodic profiling is on, its interval and the job's next moment
    for d in job.daemons:
        r = run_cli("status", "--host", d.target, "--auth-token-file", str(job.token), "--json")
        text = json.loads(r.stdout)["periodic_profiling"]
        assert text.startswith(f"on: every {INTERVAL_S} s") and f"next: {job.job_id} at " in text
    out = short_tmpdir("dyno-periodic-out-")
    r = run_cli(
        "fetch", "--hosts", job.hosts, "--auth-token-file", str(job.token), "--trace-id", trace_id,
        "--output-dir", str(out), "--no-analyze", "--json", timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    files = sorted(p.relative_to(out / trace_id).parts[0] for p in (out / trace_id).rglob("*.json*") if p.is_file())
    assert {job.host_dir(d) for d in job.daemons} <= set(files), files


def test_a_dynod_started_over_periodic_traces_resumes_their_budget(job: Job) -> None:
    """A restarted dynod: a new one over a copy of a host's trace dir (the host's own keeps serving the job)."""

    def recorded() -> list[str]:  # finished, and its record written (just after the trace's end)
        ids = [t for t in _periodic_ids(job.open) if (job.open.trace_dir / t / RECORD_NAME).is_file()]
        return [t for t in ids if (v := _trace(job.open, job, t)) is not None and v.finished]

    done = set(wait_for(recorded, 60, 0.3))
    src = job.open.trace_dir

    def others(folder: str, names: list[str]) -> list[str]:  # the traces still being written: not copied
        return [n for n in names if Path(folder) == src and (src / n).is_dir() and n not in done]

    d = Dynod(list(PERIODIC), gpu_backend="none", metrics=False)
    try:
        shutil.copytree(src, d.trace_dir, symlinks=True, ignore=others)
        d.start()
        m = wait_for(lambda: re.search(r"budget resumed from (\d+) periodic trace record\(s\) of (\d+) job", d.log), 10)
        assert int(m.group(1)) >= 1 and m.group(2) == "1", d.log
    finally:
        d.cleanup()


def test_an_on_demand_trace_during_a_periodic_one_wins(job: Job) -> None:
    d = job.open

    def recording(trace_id: str) -> bool:
        v = _trace(d, job, trace_id)
        return v is not None and v.processes[0].state == dyno_pb2.TRACE_STATE_RUNNING

    # the next moment's trace, or the one after: dynod skips a moment it reaches late or while the trainer is busy
    # (the previous test's trace still ending on a loaded machine)
    deadline = time.monotonic() + 3 * INTERVAL_S + 30
    while True:
        periodic_id, moment = _next_trace_id(job, after_s=1.0)
        try:
            wait_for(lambda t=periodic_id: recording(t), moment - time.time() + INTERVAL_S, 0.05)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    with grpc.insecure_channel(d.target) as ch:
        stub, meta = _stub(d, job, ch)
        started = stub.StartTrace(dyno_pb2.TraceRequest(job_id=job.job_id, iterations=5), timeout=10, metadata=meta)
    assert list(started.matched_pids) and len(started.triggered) == 1 and not started.busy_pids
    assert "periodic trace" in started.message
    view = _trace(d, job, periodic_id)
    assert view is not None and view.finished
    part = view.processes[0]
    assert part.state == dyno_pb2.TRACE_STATE_CANCELLED
    assert part.reason == dyno_pb2.TRACE_REASON_PREEMPTED_BY_ON_DEMAND and started.trace_id in part.error
    # the on-demand trace proceeds and ends with its file
    wait_for(lambda: (v := _trace(d, job, started.trace_id)) is not None and v.finished, 60, 0.2)
    on_demand = _trace(d, job, started.trace_id)
    assert on_demand is not None and on_demand.processes[0].state == dyno_pb2.TRACE_STATE_DONE, on_demand
    assert Path(on_demand.processes[0].path).is_file()
