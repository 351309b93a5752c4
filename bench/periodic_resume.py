"""Start-up cost of periodic profiling's budget resume (dyno.daemon.profiling.resume.resume_budget): a trace dir of
FOLDERS periodic trace folders, each with its record (PROCS processes), read back as a restarted dynod does before
its first periodic pass. Everything is written under a temporary folder, removed at the end. Target: well under 1 s.

    python bench/periodic_resume.py [--folders 1000] [--procs 1] [--repeat 3]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_common import trace_folders_args

from dyno.daemon.profiling.budget import Budget
from dyno.daemon.profiling.resume import MAX_RESUMED_RECORDS, resume_budget
from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.tracing import journal
from dyno.daemon.tracing.trust import make_trace_dir
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.trace_layout import agent_output

_JOBS = 50


def write_records(d: Path, folders: int, procs: int) -> None:
    for i in range(folders):
        job = f"job{i % _JOBS}"
        tid = f"periodic-{job}-{i:06d}"
        make_trace_dir(d, tid)
        ps = tuple(
            ProcessTraceView(
                pid,
                job,
                pid,
                PROTOCOL_AGENT,
                TraceState.CANCELLED,
                str(agent_output(d, tid, "h", pid)),
                0,
                updated_ms=2000 + i,
                running_ms=1000 + i,
            )
            for pid in range(1, procs + 1)
        )
        spec = TraceSpec(job_id=job, iterations=5, trace_id=tid, periodic=True)
        journal.write_record(d, TraceView(tid, spec, ps, True, i), "h", 3000)


def main() -> int:
    args = trace_folders_args(__doc__)
    root = Path(tempfile.mkdtemp(prefix="dyno-resume-bench-"))
    try:
        d = root / "traces"
        write_records(d, args.folders, args.procs)
        best, traces = float("inf"), 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            traces = resume_budget(Budget(0.01, 3000), d).traces
            best = min(best, time.perf_counter() - t)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.folders} periodic folders, {args.procs} process(es) each: resume_budget read {traces} records "
        f"(limit {MAX_RESUMED_RECORDS}) in {best * 1000:.0f} ms (best of {args.repeat}); target: well under 1 s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
