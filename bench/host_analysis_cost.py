"""Benchmark: what dynod's host-side analysis of a 25 MB trace costs the host, and dynod itself.

Not a test. Starts a real dynod, plants a finished trace of one process whose file is the largest shared trace
(negative_queue_length_values_check rank 0: 25.8 MB of JSON, 1.4 MB gzipped, 108,936 events) with the record dynod
reads back after a restart, and asks GetTraceSummary for it: dynod queues it and its worker process analyses it
(niced, capped, python -m dyno.daemon.analysis.worker_main). Per run it prints:

- worker CPU: the worker's own CPU time (its rusage, the summary's analysis_cpu_s), numpy's import included;
- dynod CPU: dynod's own CPU time over the run (GetTraceSummary polls every 0.5 s included);
- attributable host CPU: worker CPU + dynod CPU, all the CPU the analysis costs the host (no other process works
  for it), and its ratio to the worker's CPU;
- host CPU added: the host's busy CPU time (/proc/stat) over the run less that of an idle stretch of 3 s just before
  it, scaled to the run's length (others' load: on a shared, saturated machine this figure says nothing);
- dynod RSS before and after, and the worker's wall time from queueing to DONE.

Target (issue 20): the host gains no more than the worker's CPU time, and dynod's RSS stays flat (the worker's
memory is its own).

    python bench/host_analysis_cost.py [--runs 3] [--trace FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

import grpc
from bench_common import free_port, proc_cpu_s

from dyno.daemon.process import DynodProcess
from dyno.daemon.tracing import journal, trust
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.trace_layout import agent_output
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

HERE = Path(__file__).resolve().parent
TRACE = HERE.parent.parent / "shared" / "traces" / "gpu" / "negative_queue_length_values_check" / "rank0.json.gz"
TICKS = os.sysconf("SC_CLK_TCK")


def host_busy_s() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / TICKS


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def plant(trace_dir: Path, trace_id: str, source: Path) -> None:
    """A finished one-process trace whose file is `source`, recorded as dynod records them."""
    host, pid, now = socket.gethostname(), 4_000_000 + len(trace_id), int(time.time() * 1000)
    trust.make_trace_dir(trace_dir, trace_id, None)
    path = agent_output(trace_dir, trace_id, host, pid)
    shutil.copyfile(source, path)
    view = ProcessTraceView(
        pid, "bench-job", 0, "agent", TraceState.DONE, str(path), path.stat().st_size, updated_ms=now, uid=os.getuid()
    )
    record = TraceView(trace_id, TraceSpec(job_id="bench-job", iterations=1), (view,), True, now)
    if journal.write_record(trace_dir, record, host, now) is None:
        raise RuntimeError("the trace's record was not written (see the log)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--trace", type=Path, default=TRACE)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dyno-bench-analysis-", dir="/tmp"))
    trace_dir, port = work / "traces", free_port()
    dynod = DynodProcess([
        "--listen", "127.0.0.1", "--port", str(port), "--metrics-port", "0", "--gpu-backend", "sim",
        "--interval-s", "1", "--state-dir", str(work / "state"), "--trace-dir", str(trace_dir),
        "--agent-socket", str(work / "agent.sock"), "--kineto-endpoint", "off",
    ])  # fmt: skip
    dynod.start()
    stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    rows = []
    try:
        time.sleep(2)  # dynod settled
        for run in range(args.runs):
            trace_id = f"bench-analysis-{run}"
            plant(trace_dir, trace_id, args.trace)
            rss0 = rss_mb(dynod.pid)
            idle0 = host_busy_s()
            t_idle = time.monotonic()
            time.sleep(3.0)
            idle_rate = (host_busy_s() - idle0) / (time.monotonic() - t_idle)
            busy0, cpu0, t0 = host_busy_s(), proc_cpu_s(dynod.pid), time.monotonic()
            request = dyno_pb2.GetTraceSummaryRequest(trace_id=trace_id)
            while (s := stub.GetTraceSummary(request, timeout=10)).state not in (
                dyno_pb2.ANALYSIS_STATE_DONE, dyno_pb2.ANALYSIS_STATE_FAILED):  # fmt: skip
                time.sleep(0.5)
            wall = time.monotonic() - t0
            added = host_busy_s() - busy0 - idle_rate * wall
            dynod_cpu = proc_cpu_s(dynod.pid) - cpu0
            if s.state != dyno_pb2.ANALYSIS_STATE_DONE:
                raise RuntimeError(f"analysis failed: {s.failure_message}")
            rows.append((s.analysis_cpu_s, added, dynod_cpu, rss0, rss_mb(dynod.pid), wall, len(s.rules)))
            print(
                f"run {run}: worker CPU {s.analysis_cpu_s:.2f} s, dynod CPU {dynod_cpu:.3f} s, attributable "
                f"{s.analysis_cpu_s + dynod_cpu:.2f} s, host CPU added {added:.2f} s (busy before: "
                f"{idle_rate * 100:.0f}% of a core), dynod RSS {rss0:.1f} -> {rss_mb(dynod.pid):.1f} MB, wall "
                f"{wall:.2f} s, {len(s.rules)} rules",
                flush=True,
            )
    finally:
        dynod.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(
        f"median of {len(rows)}: worker CPU {med[0]:.2f} s, dynod CPU {med[2]:.3f} s, attributable / worker "
        f"{(med[0] + med[2]) / med[0]:.3f}, host CPU added {med[1]:.2f} s, dynod RSS {med[3]:.1f} -> {med[4]:.1f} MB "
        f"(first run's {rows[0][3]:.1f} -> last run's {rows[-1][4]:.1f} MB), wall {med[5]:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
