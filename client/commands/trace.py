"""dyno-cli trace: trace every process of a job on one or many hosts at one synchronized moment, fetch every file
(checksum-verified) into <output-dir>/<trace_id>/<host>/, write manifest.json beside them, and print the cross-rank
analysis report."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dyno.argtypes import INT32_MAX, job_id, number
from dyno.client.commands._common import REGISTER_HINT
from dyno.client.commands._hosts import add_host_command, client_auth, resolve_hosts, usage_error
from dyno.client.commands._trace_options import (
    AFTER_WINDOW_S,
    COLLECT_EXIT_CODES,
    COLLECT_FAILURES,
    ITERATION_WAIT_S,
    add_collect_arguments,
    check_collect_arguments,
    check_trace_id,
    default_wait_s,
    non_negative_float,
    positive_int32,
)
from dyno.client.commands._trace_output import check_html, check_trace_folder, check_writable, trace_folder
from dyno.exit_codes import FAILURE, OK, PARTIAL
from dyno.request_limits import (
    JOB_ID_RULE,
    MAX_DURATION_MS,
    MAX_FUTURE_START_MS,
    MAX_ITERATIONS,
    MAX_PIDS,
)
from dyno.trace_ids import new_trace_id
from dyno.trace_options import profiler_flags

# The client stack (grpc, protobuf, the trace flow and its analysis) is imported by the functions that run the
# command: `trace --help` and a usage error need none of it.
if TYPE_CHECKING:
    from dyno.client.cluster import Cluster
    from dyno.client.trace.records import HostRecord
    from dyno.v1 import dyno_pb2

__all__ = ["nothing_registered", "register", "run"]

# libkineto picks requests up on its on-demand poll, every 5 s by default (ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS):
# a start 7 s ahead lets every kineto process start on time: the request reaches it at its next poll (5 s), its
# profiler thread must see the start time still ahead on its next once-a-second tick (dynod sends it unchanged only
# with 1.3 s left, daemon/tracing/kineto_side.py), and ~0.7 s covers the fan-out to hundreds of hosts and the delivery.
# Agent processes get requests in milliseconds, so --start-delay-s 1 is enough when every process runs the agent.
DEFAULT_START_DELAY_S = 7.0
AGENT_START_DELAY_S = 1.0  # used by default when no matched process speaks libkineto's protocol
_DELAY_WHY = (
    f"{DEFAULT_START_DELAY_S:g} s when a process of the job is a libkineto one or a host did not answer, else "
    f"{AGENT_START_DELAY_S:g} s"
)
# Iteration traces start at the next step that is a multiple of this on every rank. Ranks of a data-parallel job
# step in lockstep but see the request at different steps (kineto: up to one 5 s poll apart); rounding up to a
# multiple of 10 puts them on the same step when that skew is under 10 steps, and costs at most 9 steps' wait.
DEFAULT_ITERATION_ROUNDUP = 10
MAX_START_DELAY_S = MAX_FUTURE_START_MS / 1000  # the daemons refuse later starts

# The daemons' bounds (dyno.request_limits), checked here too: a value beyond them is a usage error before any
# host is called, not INVALID_ARGUMENT from every host after the fan-out.
_duration_ms = number(int, ge=1, le=MAX_DURATION_MS)
_iterations = number(int, ge=1, le=MAX_ITERATIONS)
_process_limit = number(int, ge=0, le=INT32_MAX)  # 0: no limit, as the daemons read it

EXIT_CODES = {
    **COLLECT_EXIT_CODES,
    FAILURE: "nothing traced (no process triggered on any host; --no-fail-on-no-process makes that 0 when every host "
    f"answered, 3 when only some did), no file arrived, or {COLLECT_FAILURES}",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "trace",
        description="Ask every daemon (--host/--hosts/--hostfile/--slurm-job) to trace the registered processes "
        "of a job, all with one trace id and one start (an absolute start time --start-delay-s ahead, or the next "
        "multiple of --iteration-roundup optimizer steps); show progress per host; fetch every file as soon as it "
        "is done into OUTPUT_DIR/TRACE_ID/HOST_PORT/ (checksum-verified) with OUTPUT_DIR/TRACE_ID/manifest.json; "
        "then analyze them and print the cross-rank report. --timeout-s is the overall wait for the traces; "
        "--call-timeout-s is each RPC's deadline (and how long a daemon may stay unreachable before it is given "
        "up).",
        codes=EXIT_CODES,
        call_timeout_flag="--call-timeout-s",
    )
    p.add_argument(
        "--job-id",
        required=True,
        type=job_id,
        help=f"job id as registered (see `dyno-cli ps`), e.g. 4242 or 36199_0 ({JOB_ID_RULE})",
    )
    p.add_argument(
        "--pids",
        type=_pid_list,
        nargs="+",
        action=_Flatten,
        default=[],
        help=f"only processes whose own pid, or the pid of one of their ancestors, is one of these: a process's "
        f"pid selects it, a launcher's pid selects the launcher and its workers (separated by spaces or commas; at "
        f"most {MAX_PIDS} pids)",
    )
    p.add_argument(
        "--process-limit",
        type=_process_limit,
        default=0,
        metavar="N",
        # the daemons' order (docs/CLUSTER.md, ps --help): "leaf workers first" put DataLoader workers, leaves too,
        # before the launchers they come after
        help="trace at most N processes per host: trainers first, then launchers, then DataLoader workers (the "
        "ROLE column of `dyno-cli ps`; default 0: no limit)",
    )
    window = p.add_mutually_exclusive_group(required=True)
    window.add_argument("--duration-ms", type=_duration_ms, help=f"trace for this long (1-{MAX_DURATION_MS} ms)")
    window.add_argument("--iterations", type=_iterations, help=f"trace this many optimizer steps (1-{MAX_ITERATIONS})")
    p.add_argument(
        "--start-delay-s",
        type=non_negative_float,
        default=None,
        help=f"duration traces: start this many seconds from now, at one absolute instant on every host (default "
        f"{DEFAULT_START_DELAY_S:g} when any process of the job is an unmodified libkineto one, which polls every 5 s; "
        f"{AGENT_START_DELAY_S:g} when all are dyno agents; 0 starts each process as soon as it sees the request; at "
        f"most {MAX_START_DELAY_S:g})",
    )
    p.add_argument(
        "--iteration-roundup",
        type=_iterations,
        default=None,
        metavar="K",
        help=f"iteration traces: start at the next optimizer step that is a multiple of K, on every rank (default "
        f"{DEFAULT_ITERATION_ROUNDUP}; 1-{MAX_ITERATIONS})",
    )
    p.add_argument("--trace-id", default="", help="use this trace id ([A-Za-z0-9_.-]{1,64}); default: a new one")
    for flag, what in (
        ("--record-shapes", "input shapes"),
        ("--profile-memory", "memory allocations"),
        ("--with-stack", "Python stacks"),
        ("--with-flops", "FLOP estimates"),
        ("--with-modules", "nn.Module hierarchy"),
    ):
        p.add_argument(flag, action="store_true", help=f"record {what}")
    add_collect_arguments(
        p,
        zero_timeout=False,
        timeout_help="overall wait for the traces; then unfinished ones are cancelled (files already done are still "
        f"fetched). Default: start delay + duration + {AFTER_WINDOW_S:g} s, or {ITERATION_WAIT_S:g} s for iteration "
        "traces; a duration trace's must be longer than the start delay (--start-delay-s, or its default) + the "
        "duration",
    )
    p.add_argument(
        "--fail-on-no-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="exit 1 when no process was triggered on any host (default; --no-fail-on-no-process exits 0 when every "
        "host answered and matched no process, 3 when some hosts failed, 1 when none answered)",
    )
    p.set_defaults(func=run)


def _pid_list(text: str) -> list[int]:
    """One --pids word: a pid, or pids joined by commas as `dyno-cli ps` prints ANCESTRY ("4242,4240"); the comma
    form was refused as "not an integer" while the help's "PIDS [PIDS ...]" did not say that commas were wrong."""
    return [int(positive_int32(part.strip())) for part in text.split(",")]


class _Flatten(argparse.Action):
    """Appends the pids of every word (each a list, _pid_list) to one flat list; repeating the option adds more."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,  # nargs="+": one list[int] (from _pid_list) per word
        option_string: str | None = None,
    ) -> None:
        pids = list(getattr(namespace, self.dest) or [])
        for word in values:
            pids.extend(word)
        setattr(namespace, self.dest, pids)


def _validate(args: argparse.Namespace) -> None:
    check_collect_arguments(args)
    if args.iterations is not None and args.start_delay_s is not None:
        usage_error("--start-delay-s applies to --duration-ms traces (iteration traces use --iteration-roundup)")
    if args.duration_ms is not None and args.iteration_roundup is not None:
        usage_error("--iteration-roundup applies to --iterations traces (duration traces use --start-delay-s)")
    if args.start_delay_s is not None and args.start_delay_s > MAX_START_DELAY_S:
        usage_error(f"--start-delay-s: must be 0-{MAX_START_DELAY_S:g} (the daemons refuse later starts)")
    if args.start_delay_s is not None:
        _check_window(args, args.start_delay_s)
    else:  # before any host is called: the default is at least the agents' (run() checks it again once chosen)
        _check_window(args, AGENT_START_DELAY_S, default_delay=True)
    if len(args.pids) > MAX_PIDS:
        usage_error(f"--pids: at most {MAX_PIDS} pids (got {len(args.pids)})")
    if args.trace_id:
        check_trace_id(args.trace_id)


def _check_window(args: argparse.Namespace, start_delay_s: float, *, default_delay: bool = False) -> None:
    """Usage error when a duration trace's --timeout-s ends the wait before its window (start delay + duration) does:
    every process would be started, then cancelled, a trace taken for nothing. Checked again once the default start
    delay is known (7 s for a job with a libkineto process), before any StartTrace."""
    if args.duration_ms is None or args.timeout_s is None:
        return
    window_s = start_delay_s + args.duration_ms / 1000
    if args.timeout_s <= window_s:
        why = f" (the default for this job: {_DELAY_WHY}; --start-delay-s sets it)" if default_delay else ""
        usage_error(
            f"--timeout-s {args.timeout_s:g} ends the wait before the trace's window ends (start in "
            f"{start_delay_s:g} s{why} + {args.duration_ms / 1000:g} s): every process would be cancelled; "
            f"give more than {window_s:g} s (the files need a few more), or leave it out (default: the window "
            f"+ {AFTER_WINDOW_S:g} s)"
        )


def _request(args: argparse.Namespace, trace_id: str, start_delay_s: float, now_s: float) -> dyno_pb2.TraceRequest:
    from dyno.v1 import dyno_pb2

    req = dyno_pb2.TraceRequest(
        job_id=args.job_id,
        pids=args.pids,
        process_limit=args.process_limit,
        trace_id=trace_id,
        **profiler_flags(args),
    )
    if args.duration_ms is not None:
        req.duration_ms = args.duration_ms
        if start_delay_s > 0:
            # ONE absolute instant for every host: computed once, here, not by each daemon.
            req.start_time_ms = int((now_s + start_delay_s) * 1000)
    else:
        req.iterations = args.iterations
        req.start_iteration_roundup = args.iteration_roundup or DEFAULT_ITERATION_ROUNDUP
    return req


def _start_text(req: dyno_pb2.TraceRequest, n_hosts: int) -> str:
    if req.HasField("duration_ms"):
        what = f"{req.duration_ms} ms"
        if req.HasField("start_time_ms"):
            at = time.strftime("%H:%M:%S", time.localtime(req.start_time_ms / 1000))
            what += f" from {at}.{req.start_time_ms % 1000:03d} (in {req.start_time_ms / 1000 - time.time():.1f} s)"
    else:
        what = f"{req.iterations} optimizer steps from the next multiple of {req.start_iteration_roundup}"
    return f"trace {req.trace_id}: job {req.job_id!r} on {n_hosts} host(s), {what}"


def _default_start_delay(cluster: Cluster, job_id: str) -> float:
    """A synchronized start must wait for the slowest process to see the request: libkineto's next poll (up to
    5 s) when the job has a libkineto process or a host did not answer; a dyno agent's stream otherwise (ms)."""
    from dyno.v1 import dyno_pb2

    results = cluster.list_processes(job_id)
    kineto = any(p.protocol == dyno_pb2.PROTOCOL_KINETO for r in results if r.ok for p in r.answer.processes)
    return DEFAULT_START_DELAY_S if kineto or not all(r.ok for r in results) else AGENT_START_DELAY_S


def nothing_registered(hosts: Sequence[HostRecord]) -> bool:
    """Whether the hosts that answered StartTrace (and matched nothing) had no process registered at all, of any
    job: then the job id is not what went wrong, and `dyno-cli ps` would list nothing either. Unreachable hosts
    are reported on their own."""
    from dyno.client.trace.records import HOST_NO_MATCH

    answered = [h for h in hosts if h.state == HOST_NO_MATCH]
    return bool(answered) and not any(h.registered_jobs or h.matched_pids or h.busy_pids for h in answered)


def _nothing_traced_code(args: argparse.Namespace, hosts: Sequence[HostRecord]) -> int:
    """The exit code when no host triggered a process. --no-fail-on-no-process forgives hosts that answered and
    matched nothing (a job not running yet), not hosts that failed (down, a wrong port, refused the token): it exited
    0 with every daemon unreachable. Then: 1 when no host answered, 3 (partial) when some did."""
    if args.fail_on_no_process:
        return FAILURE
    from dyno.client.trace.records import HOST_NO_MATCH

    answered = sum(h.state == HOST_NO_MATCH for h in hosts)
    if answered == len(hosts):
        return OK
    return PARTIAL if answered else FAILURE


def run(args: argparse.Namespace) -> int:
    from dyno.client.cluster import Cluster
    from dyno.client.commands._trace_flow import TraceFlow
    from dyno.client.commands._trace_render import nothing_to_follow, say
    from dyno.client.trace.cluster import ClusterTrace
    from dyno.client.trace.manifest import write_manifest

    _validate(args)
    hosts = resolve_hosts(args)
    auth = client_auth(args)
    trace_id = args.trace_id or new_trace_id()
    folder: Path | None = None  # --summaries: nothing is fetched or written
    if not args.summaries:
        folder = (args.output_dir / trace_id).absolute()  # every path printed is absolute
        check_trace_folder(folder, may_hold_files=False)
        check_writable(args.output_dir)  # before anything is traced: a trace nobody can fetch is wasted
    check_html(args.html, no_analyze=args.no_analyze)
    with Cluster(hosts, deadline_s=args.call_timeout_s, max_concurrency=args.max_concurrency, auth=auth) as cluster:
        start_delay_s = args.start_delay_s
        if start_delay_s is None:
            start_delay_s = _default_start_delay(cluster, args.job_id) if args.duration_ms is not None else 0.0
            _check_window(args, start_delay_s, default_delay=True)
        now = time.time()
        requested_ms = int(now * 1000)
        req = _request(args, trace_id, start_delay_s, now)
        wait_s = default_wait_s(req, now) if args.timeout_s is None else args.timeout_s
        ct = ClusterTrace(
            cluster,
            req,
            folder,
            wait_s=wait_s,
            unreachable_s=args.call_timeout_s,
            fetch_concurrency=args.fetch_concurrency,
        )
        flow = TraceFlow(ct, args, folder, command="trace", requested_ms=requested_ms)
        say(_start_text(req, len(hosts)))
        # From the first StartTrace on, a Ctrl-C must end in the traces cancelled and a whole manifest: it is held
        # back except where the command waits (flow.guard), so it cannot cut a cancel or a manifest write.
        with flow.guard, trace_folder(folder):  # (--summaries: no folder)
            interrupted = False
            try:
                with flow.guard.interruptible():
                    ct.start()
            except KeyboardInterrupt:  # StartTrace calls may be in flight: what they start must not run on unseen
                interrupted = True
                say("dyno-cli trace: interrupted while starting: cancelling what was started")
                ct.interrupt()
            if not interrupted and not ct.triggered_any:
                what = f"nothing traced on any of {len(hosts)} host(s)"
                hint = REGISTER_HINT if nothing_registered(ct.snapshot()) else ""
                return nothing_to_follow(flow, what, _nothing_traced_code(args, ct.snapshot()), hint)
            if not interrupted and folder is not None:  # (an interrupted start is recorded once, by flow.run)
                try:
                    write_manifest(folder, flow.manifest("running"))
                except OSError:  # e.g. a full disk: nothing could be recorded or fetched, so stop what was started
                    say("dyno-cli trace: cannot write the manifest: cancelling the trace")
                    ct.interrupt()
                    raise
            return flow.run(f"trace {trace_id} (job {args.job_id})", interrupted=interrupted)
