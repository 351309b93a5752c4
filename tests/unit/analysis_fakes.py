"""Shared values of the analysis tests: trace views and an Analyses over a real job database whose worker is a
substituted command."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from dyno.daemon.analysis.analyses import Analyses
from dyno.daemon.analysis.runner import WorkerCommand, WorkerLimits, WorkerRunner
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.v1 import dyno_pb2

# the traced processes' user is this test's (a root dynod runs the worker as that user, who must reach Python)
ME = os.getuid()
OTHER = ME + 1
NAMES = {ME: "alice", OTHER: "bob"}

# how long a test waits for an analysis: its worker is a Python process started on a loaded 2-core machine
ANALYSIS_WAIT_S = 20.0

# writes a good summary for the trace id it is given (the worker's arguments: --trace-id ID --out DIR -- FILES)
GOOD_WORKER = textwrap.dedent(
    """
    import gzip, json, sys
    args = sys.argv[1:]
    tid, out = args[args.index("--trace-id") + 1], args[args.index("--out") + 1]
    doc = {"schema": "dyno.trace_summary", "version": 1, "trace_id": tid, "state": "DONE",
           "rules": [{"rule": "dataloader", "severity": "HIGH", "time_lost_share": 0.4}],
           "ranks": [{"rank": 0, "steps": 3, "mean_step_us": 10.0}], "rank_parts_thinned": False}
    open(out + "/summary.json", "w").write(json.dumps(doc))
    open(out + "/rank_parts.bin", "wb").write(gzip.compress(b"{}"))
    """
)


def view(
    trace_id: str, *states: TraceState, uid: int = ME, finished: bool = True, job: str = "job-1", at: int = 5000
) -> TraceView:
    """`at`: when its first process's file was written (its trace_finished_ms: the last one's, at + processes - 1)."""
    procs = tuple(
        ProcessTraceView(
            100 + i,
            job,
            i,
            "agent",
            s,
            f"/traces/{trace_id}/h_{100 + i}.pt.trace.json.gz",
            error="" if s == TraceState.DONE else "it failed",
            updated_ms=at + i,
            uid=uid,
        )
        for i, s in enumerate(states)
    )
    return TraceView(trace_id, TraceSpec(job_id=job), procs, finished, created_ms=at - 1000)


def listed_trace(a: Analyses, key: tuple[str, str]) -> str:
    """The trace of ListJobs' latest_analysis of `key` (job id, user)."""
    return dyno_pb2.TraceSummary.FromString(a.latest_listed({key})[key]).trace_id


def worker(code: str) -> WorkerCommand:
    """A worker command running `code` with the worker's arguments."""

    def command(job: AnalysisJob, out: Path) -> Sequence[str]:
        return [sys.executable, "-c", code, "--trace-id", job.trace_id, "--out", str(out), "--", *job.files]

    return command


def analyses(tmp_path: Path, code: str = GOOD_WORKER, *, db: JobStore | None = None, **kw: object) -> Analyses:
    store = AnalysisStore(lambda: db, retention_s=86400.0, max_bytes=2**30)
    runner = WorkerRunner(WorkerLimits(timeout_s=20, memory_mb=512), worker(code), tmp_dir=tmp_path)
    return Analyses("node1", store, runner, name_of=lambda uid: NAMES.get(uid, str(uid)), clock_ms=lambda: 9000, **kw)  # type: ignore[arg-type]
