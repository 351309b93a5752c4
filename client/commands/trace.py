"""dyno-cli trace: trace the processes of a job on one host, wait, and fetch every file (sha256-verified)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, dataclass

from dyno.client.client import DEFAULT_PORT, DynoClient, format_target
from dyno.client.commands._common import print_json
from dyno.client.errors import DynoError
from dyno.client.format import human_bytes, table
from dyno.v1 import dyno_pb2

__all__ = ["register", "run", "ProcessResult"]

_STATE = {v.number: v.name.removeprefix("TRACE_STATE_").lower() for v in dyno_pb2.TraceState.DESCRIPTOR.values}
_FINAL = {
    dyno_pb2.TRACE_STATE_DONE,
    dyno_pb2.TRACE_STATE_FAILED,
    dyno_pb2.TRACE_STATE_TIMED_OUT,
    dyno_pb2.TRACE_STATE_CANCELLED,
}
_POLL_S = 0.25
_CALL_TIMEOUT_S = 10.0


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def _non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        help="trace a job's PyTorch processes on one host and fetch the files",
        description="Ask the daemon to trace the registered processes of a job (for a duration or a number of "
        "optimizer steps), show progress, wait, and fetch every trace file into --output-dir, verifying its "
        "sha256. Exit 0 when every triggered trace arrived, 1 otherwise (the reason is printed).",
    )
    g = p.add_argument_group("daemon")
    g.add_argument(
        "--host", default=os.environ.get("DYNO_HOST", "localhost"), help="daemon host (default $DYNO_HOST or localhost)"
    )
    g.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("DYNO_PORT", DEFAULT_PORT)),
        help=f"daemon gRPC port (default $DYNO_PORT or {DEFAULT_PORT})",
    )
    p.add_argument("--job-id", required=True, help="job id as registered (see `dyno-cli ps`), e.g. 4242 or 36199_0")
    p.add_argument(
        "--pids",
        type=_positive_int,
        nargs="+",
        default=[],
        help="only processes with one of these pids in their ancestry (a launcher's pid selects its workers)",
    )
    p.add_argument(
        "--process-limit",
        type=_positive_int,
        default=0,
        help="trace at most N processes, leaf workers before their launchers",
    )
    window = p.add_mutually_exclusive_group(required=True)
    window.add_argument("--duration-ms", type=_positive_int, help="trace for this long")
    window.add_argument("--iterations", type=_positive_int, help="trace this many optimizer steps")
    p.add_argument(
        "--start-delay-s",
        type=_non_negative_float,
        default=0.0,
        help="duration traces: start this many seconds from now, at the same instant in every process",
    )
    p.add_argument("--trace-id", default="", help="use this trace id ([A-Za-z0-9_.-]{1,64}); default: the daemon's")
    for flag, what in (
        ("--record-shapes", "input shapes"),
        ("--profile-memory", "memory allocations"),
        ("--with-stack", "Python stacks"),
        ("--with-flops", "FLOP estimates"),
        ("--with-modules", "nn.Module hierarchy"),
    ):
        p.add_argument(flag, action="store_true", help=f"record {what}")
    p.add_argument("--output-dir", required=True, help="where the fetched trace files go")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of progress and a table")
    p.add_argument(
        "--fail-on-no-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="exit 1 when no process was triggered (default; --no-fail-on-no-process exits 0)",
    )
    p.add_argument(
        "--timeout-s",
        type=_non_negative_float,
        default=0.0,
        help="give up (and cancel) after this long; default: duration + start delay + 60 s, "
        "or 300 s for iteration traces",
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class ProcessResult:
    pid: int
    rank: int | None
    state: str
    path: str  # the local file when fetched, else the daemon-side path
    size_bytes: int
    error: str = ""


def _request(args: argparse.Namespace) -> dyno_pb2.TraceRequest:
    req = dyno_pb2.TraceRequest(
        job_id=args.job_id,
        pids=args.pids,
        process_limit=args.process_limit,
        trace_id=args.trace_id,
        record_shapes=args.record_shapes,
        profile_memory=args.profile_memory,
        with_stack=args.with_stack,
        with_flops=args.with_flops,
        with_modules=args.with_modules,
    )
    if args.duration_ms is not None:
        req.duration_ms = args.duration_ms
        if args.start_delay_s:
            req.start_time_ms = int((time.time() + args.start_delay_s) * 1000)
    else:
        req.iterations = args.iterations
    return req


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, file=sys.stderr, flush=True)


def _rank(p: dyno_pb2.ProcessTrace) -> int | None:
    return p.rank if p.HasField("rank") else None


def _wait(c: DynoClient, args: argparse.Namespace, trace_id: str, deadline: float) -> dyno_pb2.TraceStatus:
    seen: dict[int, int] = {}
    while True:
        status = c.get_trace(trace_id)
        for p in status.processes:
            if seen.get(p.pid) != p.state:
                seen[p.pid] = p.state
                rank = _rank(p)
                who = f"pid {p.pid}" + (f" (rank {rank})" if rank is not None else "")
                _say(args, f"  {who}: {_STATE.get(p.state, '?')}" + (f": {p.error}" if p.error else ""))
        if status.finished:
            return status
        if time.monotonic() > deadline:
            _say(args, f"timed out after {args.timeout_s or 'the default'} s: cancelling {trace_id}")
            return c.cancel_trace(trace_id)
        time.sleep(_POLL_S)


def _summary(results: list[ProcessResult]) -> str:
    rows = [
        [
            r.pid,
            "-" if r.rank is None else r.rank,
            r.state,
            r.path if not r.error else f"{r.path} ({r.error})",
            human_bytes(r.size_bytes) if r.size_bytes else "-",
        ]
        for r in results
    ]
    return table(["PID", "RANK", "STATE", "PATH", "SIZE"], rows)


def run(args: argparse.Namespace) -> int:
    if args.start_delay_s and args.iterations is not None:
        print("dyno-cli trace: error: --start-delay-s applies to --duration-ms traces only", file=sys.stderr)
        return 2
    started = time.monotonic()
    with DynoClient(format_target(args.host, args.port), timeout_s=_CALL_TIMEOUT_S) as c:
        resp = c.start_trace(_request(args))
        if not resp.triggered:
            reason = resp.message or "no process matched"
            if args.json:
                print_json(
                    {
                        "trace_id": resp.trace_id,
                        "host": resp.hostname,
                        "ok": not args.fail_on_no_process,
                        "message": reason,
                        "registered_jobs": list(resp.registered_jobs),
                        "processes": [],
                    }
                )
            else:
                print(f"dyno-cli trace: {reason}", file=sys.stderr)
            return 1 if args.fail_on_no_process else 0
        _say(args, f"trace {resp.trace_id} on {resp.hostname}: {resp.message}")
        if resp.busy_pids:
            _say(args, f"  busy (already tracing, skipped): {', '.join(map(str, resp.busy_pids))}")
        if args.timeout_s:
            budget = args.timeout_s
        elif args.duration_ms is not None:
            budget = args.duration_ms / 1000 + args.start_delay_s + 60
        else:
            budget = 300.0
        status = _wait(c, args, resp.trace_id, started + budget)
        results: list[ProcessResult] = []
        for p in status.processes:
            state = _STATE.get(p.state, "?")
            if p.state != dyno_pb2.TRACE_STATE_DONE:
                results.append(ProcessResult(p.pid, _rank(p), state, p.path, p.size_bytes, p.error or state))
                continue
            try:
                got = c.fetch_trace_file(resp.trace_id, p.pid, args.output_dir)
            except DynoError as e:
                results.append(ProcessResult(p.pid, _rank(p), "fetch_failed", p.path, 0, str(e)))
                continue
            results.append(ProcessResult(p.pid, _rank(p), state, str(got.path), got.size_bytes))
    failed = [r for r in results if r.error]
    if args.json:
        print_json(
            {
                "trace_id": resp.trace_id,
                "host": resp.hostname,
                "ok": not failed,
                "busy_pids": list(resp.busy_pids),
                "processes": [asdict(r) for r in results],
            }
        )
    else:
        print(_summary(results))
    if failed:
        print(
            f"dyno-cli trace: {len(failed)} of {len(results)} trace(s) did not arrive: "
            + "; ".join(f"pid {r.pid}: {r.error}" for r in failed),
            file=sys.stderr,
        )
        return 1
    return 0
