"""Start-up cost of finding again the analyses a restart left undone (dyno.daemon.analysis.requeue): a trace dir of
FOLDERS finished trace folders (PROCS processes each, every one DONE with its file), a real job database in which
every other trace has its analysis stored, read back as a restarted dynod does on its analysis queue's thread: the
newest 1000 records (tracing/recorded.py) and one query for the stored ones give the backlog; then its turns
(dyno.daemon.analysis.backlog: one query and one offer each, on the queue's thread between two analyses), all of it
drained into a queue that takes each. Everything is written under a temporary folder, removed at the end. Targets:
the requeue well under 1 s (off the RPC path either way); a backlog turn under 1 ms (beside a worker's ~0.4 s).

    python bench/analysis_requeue.py [--folders 1000] [--procs 1] [--repeat 3]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_common import trace_folders_args

from dyno.daemon.analysis.backlog import Backlog, BacklogStep
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.queue import Offered
from dyno.daemon.analysis.requeue import requeue_unanalysed
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.analysis.work import AnalysisJob, job_of
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.tracing import journal
from dyno.daemon.tracing.recorded import MAX_RECORDS_READ, recorded_traces
from dyno.daemon.tracing.trust import make_trace_dir
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.trace_layout import agent_output
from dyno.trace_summary import AnalysisState, TraceSummary

_JOBS = 50


def write_traces(d: Path, store: AnalysisStore, folders: int, procs: int) -> None:
    for i in range(folders):
        job = f"job{i % _JOBS}"
        tid = f"periodic-{job}-{i:06d}" if i % 2 else f"ondemand-{i:06d}"
        make_trace_dir(d, tid)
        ps = []
        for pid in range(1, procs + 1):
            path = agent_output(d, tid, "h", pid)
            path.write_bytes(b"trace")
            ps.append(
                ProcessTraceView(pid, job, pid, PROTOCOL_AGENT, TraceState.DONE, str(path), 5, updated_ms=2000 + i)
            )
        spec = TraceSpec(job_id=job, iterations=5, trace_id=tid, periodic=bool(i % 2))
        journal.write_record(d, TraceView(tid, spec, tuple(ps), True, i), "h", 3000)
        if i % 2 == 0:
            s = TraceSummary(tid, job_id=job, user="u", hostname="h", state=AnalysisState.DONE, analyzed_ms=3000 + i)
            store.save(Outcome(s), b"", 3000 + i)


def _taken(job: AnalysisJob) -> Offered:
    """A queue that always has a place (the backlog is offered only to an empty one)."""
    return Offered.QUEUED


def main() -> int:
    args = trace_folders_args(__doc__)
    root = Path(tempfile.mkdtemp(prefix="dyno-requeue-bench-"))
    try:
        d = root / "traces"
        db = JobStore.in_dir(root)
        store = AnalysisStore(lambda: db, retention_s=1e12, max_bytes=2**40, per_job=10**9)
        write_traces(d, store, args.folders, args.procs)
        best = best_read = best_turn = float("inf")
        records = backlog = 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            recorded_traces(d)
            best_read = min(best_read, time.perf_counter() - t)
            t = time.perf_counter()
            r = requeue_unanalysed(d, store.analysed, lambda v: job_of(v, "h", str), per_job=store.per_job)
            best = min(best, time.perf_counter() - t)
            records, backlog = r.records, len(r.backlog)
            b = Backlog(r.backlog)
            t = time.perf_counter()
            while b.offer_next(store.analysed, _taken) == BacklogStep.QUEUED:
                pass
            best_turn = min(best_turn, (time.perf_counter() - t) / max(backlog, 1))
        db.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.folders} finished trace folders, {args.procs} process(es) each, half analysed: read {records} records "
        f"(limit {MAX_RECORDS_READ}) in {best_read * 1000:.0f} ms; requeue_unanalysed (records, the stored ones) "
        f"in {best * 1000:.0f} ms (best of {args.repeat}); "
        f"target: well under 1 s; {backlog} in the backlog, a turn of it {best_turn * 1e6:.0f} µs; target: under 1 ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
