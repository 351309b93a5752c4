"""ClusterTrace: one trace request on many daemons (one trace id, one start), polled and fetched host by host; the
engine behind `dyno-cli trace` (`start()`: StartTrace on every host at once, retried safely by
trace.start.start_trace_retrying) and `dyno-cli fetch` (`attach()`: GetTrace of a trace started earlier).

Each host with processes in the trace gets its own worker thread (`follow()`) that polls GetTrace and fetches each
file as soon as its process is done (trace.fetch.TraceFetcher), so a slow or dead host never holds back another's.
The state lives in plain records under one lock (trace.answers merges the daemons' answers into them); `snapshot()`
hands copies to the progress view and the manifest. Only a started trace is ours to end: at `wait_s` and on
`interrupt()` its unfinished processes are cancelled; an attached trace's are left running.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from dyno.client.client import DynoClient
from dyno.client.cluster import Cluster
from dyno.client.errors import DeadlineExceeded, DynoError, NotFound, Unavailable
from dyno.client.trace import answers
from dyno.client.trace.fetch import TraceFetcher
from dyno.client.trace.records import (
    FINAL_STATES,
    HOST_FAILED,
    HOST_TRACING,
    FetchFailure,
    HostRecord,
    PreviousFile,
    fetch_failure_of,
    host_dir_name,
)
from dyno.client.trace.restarts import DaemonInstances, restarted_text
from dyno.client.trace.start import NOT_FOUND_HINT, StartFanout
from dyno.v1 import dyno_pb2

__all__ = ["ClusterTrace"]

log = logging.getLogger(__name__)


class ClusterTrace:
    """Runs one cluster-wide trace. `out_dir` is the trace folder (<output-dir>/<trace_id>); host folders go
    below it; None: the processes are followed to their end and nothing is fetched (`dyno-cli trace --summaries`).
    `wait_s`: how long after `start()` / `attach()` traces may take before we stop waiting (a started trace's
    unfinished processes are then cancelled; files already done are still fetched). `unreachable_s`: how
    long a host may fail GetTrace before it is given up. `previous`: files an earlier run fetched into `out_dir`,
    by (host, pid) (see manifest.previous_files): one that still matches is kept instead of fetched again."""

    def __init__(
        self,
        cluster: Cluster,
        request: dyno_pb2.TraceRequest,
        out_dir: Path | None,
        *,
        wait_s: float,
        unreachable_s: float = 5.0,
        poll_s: float = 0.25,
        fetch_concurrency: int = 8,
        fetch_timeout_s: float = 600.0,
        previous: Mapping[tuple[str, int], PreviousFile] | None = None,
    ) -> None:
        if not request.trace_id:
            raise ValueError("a cluster trace needs a caller-chosen trace_id (one id on every host)")
        self.cluster = cluster
        self.request = request
        self.trace_id = request.trace_id
        self.out_dir = out_dir
        self.wait_s = wait_s
        self.unreachable_s = unreachable_s
        self.poll_s = poll_s
        self.hosts = [HostRecord(h, host_dir_name(h)) for h in cluster.hosts]
        self.started_monotonic = 0.0
        self._attach_fanout_s = 0.0
        self.created_ms = 0  # attach(): when the daemons created the trace (the earliest of them)
        self.owns_trace = True  # started here: ours to cancel; attach() makes it False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.fetcher = (
            None
            if out_dir is None
            else TraceFetcher(
                self.trace_id,
                out_dir,
                lock=self._lock,
                stop=self._stop,
                concurrency=fetch_concurrency,
                timeout_s=fetch_timeout_s,
                previous=previous,
            )
        )
        self._host_slots = threading.Semaphore(cluster.max_concurrency)
        self._workers_done: list[threading.Event] = []  # one per following thread, set when it ends
        self._cancel_reasons: dict[str, str] = {}  # host dir -> why we cancelled its trace
        self._instances = DaemonInstances()  # which daemon answered last on each host: restarts mid-trace
        self._start = StartFanout(
            cluster, request, self.hosts, lock=self._lock, stop=self._stop, instances=self._instances
        )

    # -- start ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """StartTrace on every host at once (start.StartFanout); fills each host's record (triggered processes or
        the reason)."""
        self.started_monotonic = time.monotonic()
        self._start.run(self.started_monotonic)

    @property
    def start_fanout_s(self) -> float:
        """How long the StartTrace fan-out took (or attach()'s GetTrace fan-out)."""
        return self._start.fanout_s if self.owns_trace else self._attach_fanout_s

    # -- attach -----------------------------------------------------------------------------------------------
    def attach(self) -> None:
        """Join a trace already running or finished on the daemons instead of starting one: GetTrace on every host
        at once. A host that has the trace's processes is marked tracing (follow() then polls and fetches as after
        start()); a host that does not know the trace id (NOT_FOUND: wrong id, removed by retention, or still
        running when the daemon restarted) or cannot be reached is failed with the reason. `request` becomes the
        daemons' record of the request (the first host that answered). Nothing is started, and nothing will be
        cancelled."""
        self.owns_trace = False
        self.started_monotonic = time.monotonic()
        results = self.cluster.call(lambda c: c.get_trace(self.trace_id))
        self._attach_fanout_s = time.monotonic() - self.started_monotonic
        created: list[int] = []
        have_request = False
        with self._lock:
            for h, r in zip(self.hosts, results, strict=True):
                h.start_s = round(r.elapsed_s, 4)
                if not r.ok or r.value is None:
                    h.state, h.error, h.error_type = HOST_FAILED, r.error or "", r.error_type or ""
                    if r.error_type == NotFound.__name__ and not restarted_text(r.reason):
                        # the daemon names the id, and a restart when it still has the trace's folder
                        h.error += NOT_FOUND_HINT
                    continue
                status: dyno_pb2.TraceStatus = r.value
                if not have_request and status.HasField("request"):
                    have_request = True
                    self.request = dyno_pb2.TraceRequest()
                    self.request.CopyFrom(status.request)
                    self.request.trace_id = self.trace_id
                if status.created_ms:
                    created.append(status.created_ms)
                self._instances.set(h.dir, status.instance_id)
                answers.apply_attach(h, status)
        self.created_ms = min(created, default=0)

    @property
    def attached_any(self) -> bool:
        """After attach(): whether any host has processes of the trace (the same test as triggered_any)."""
        return self.triggered_any

    @property
    def triggered_any(self) -> bool:
        with self._lock:
            return any(h.state == HOST_TRACING for h in self.hosts)

    # -- follow -----------------------------------------------------------------------------------------------
    def follow(self) -> None:
        """Start one worker per tracing host (polling, fetching); returns at once. See wait()."""
        for h in self.hosts:
            if h.state == HOST_TRACING:
                done = threading.Event()
                self._workers_done.append(done)
                t = threading.Thread(target=self._host_worker, args=(h, done), name=f"trace-{h.dir}", daemon=True)
                t.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the workers; True when all have finished. Events, not Thread.join(): see StartFanout.run()."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        return all(d.wait(None if end is None else max(0.0, end - time.monotonic())) for d in self._workers_done)

    def interrupt(self, grace_s: float = 3.0) -> None:
        """Stop following (Ctrl-C): abort fetches, cancel the traces still running on the daemons when we
        started them (best effort; an attached trace is left running), and mark what did not arrive.

        One deadline, `grace_s` from the call (once no StartTrace is in flight), bounds all of it: the cancels go
        to every host at once right away, while the host threads stop, so a wedged daemon cannot double it."""
        self._stop.set()
        # A StartTrace still in flight may yet start traces: wait for its answer (the fan-out ends by its
        # deadline, StartFanout's GetTrace confirmation by one more); hosts that never answered keep the state
        # "tracing" and are cancelled below all the same.
        self._start.wait_answered(2 * self.cluster.deadline_s + 1.0)
        end = time.monotonic() + grace_s
        with self._lock:
            pending = [h for h in self.hosts if h.state == HOST_TRACING]
            unconfirmed = [h for h in self.hosts if h.dir in self._start.unconfirmed]
        if (pending or unconfirmed) and self.owns_trace:
            self._cancel_all(pending + unconfirmed, unconfirmed, end - _CLOSE_RESERVE_S - time.monotonic())
        self.wait(max(0.0, end - _CLOSE_RESERVE_S - time.monotonic()))
        if not self.wait(0):
            # A fetch from a wedged daemon notices the stop only with its next chunk: closing the channels ends
            # its stream, so it removes its partial file before the CLI exits (its threads are daemons).
            self.cluster.close()
            self.wait(max(0.0, end - time.monotonic()))
        with self._lock:
            for h in pending:
                h.state, h.error = HOST_FAILED, "interrupted"
                for p in h.processes:
                    if not p.ok and p.state not in FINAL_STATES - {"done"}:
                        p.error = p.error or "interrupted before the file arrived"
                        if p.state == "done" and not p.fetch_failure:
                            p.fetch_failure = FetchFailure.INTERRUPTED

    def _cancel_all(self, hosts: list[HostRecord], unconfirmed: list[HostRecord], budget_s: float) -> None:
        """CancelTrace on `hosts`, all at once (one fan-out; a wedged daemon costs its own call only), within
        `budget_s`. The reason is recorded first: a host thread that sees the cancelled state before the
        cancel's answer merges it with that reason too."""
        reason = "cancelled: interrupted"
        with self._lock:
            for h in hosts:
                self._cancel_reasons[h.dir] = reason
        results = self.cluster.call(
            lambda c: c.cancel_trace(self.trace_id),
            deadline_s=max(budget_s, _MIN_CANCEL_S),
            hosts=[h.host for h in hosts],
        )
        for h, r in zip(hosts, results, strict=True):
            if r.value is not None:
                self._update(h, r.value, reason=reason)
                if h in unconfirmed and r.value.processes:  # (a daemon that never got it answers NOT_FOUND)
                    with self._lock:
                        h.error += " (its trace had started all the same: cancelled)"

    def snapshot(self) -> list[HostRecord]:
        with self._lock:
            return copy.deepcopy(self.hosts)

    def fetched_files(self) -> list[Path]:
        if self.out_dir is None:
            return []
        out_dir = self.out_dir
        with self._lock:
            return [out_dir / p.file for h in self.hosts for p in h.processes if p.ok]

    # -- per host ---------------------------------------------------------------------------------------------
    def _host_worker(self, h: HostRecord, done: threading.Event) -> None:
        try:
            with self._host_slots:
                try:
                    self._follow_host(h)
                except Exception as e:  # a bug here must not hide the other hosts' results
                    if self._stop.is_set():  # interrupt() closed the channels under a call ("closed channel")
                        log.debug("following %s ended by the interrupt: %s", h.host, e)
                        return
                    log.exception("following %s failed", h.host)
                    self._fail_host(h, f"{type(e).__name__}: {e}", type(e).__name__, FetchFailure.CLIENT_ERROR)
        finally:
            done.set()

    def _follow_host(self, h: HostRecord) -> None:
        client = self.cluster.client(h.host)
        wait_end = self.started_monotonic + self.wait_s
        failing_since: float | None = None
        cancelled_at: float | None = None
        restart_logged = False
        unreachable = False  # the daemon went away, or forgot the trace, mid-trace: it may have restarted
        while not self._stop.is_set():
            try:
                status = client.get_trace(self.trace_id)
            except DynoError as e:
                now = time.monotonic()
                failing_since = failing_since or now
                unreachable = True
                if self._restarted_mid_trace(client, h, e) and now < wait_end and self._may_report_after_restart(h):
                    # the daemon restarted mid-trace and has the trace's folder: an agent process that goes on
                    # recording reports to it once it has re-registered, and it takes the trace on from that report
                    # (daemon/tracing/agent_side.py). Wait for that until --timeout-s; after it, fail with the reason.
                    failing_since = None  # the daemon answered: it is up
                    if not restart_logged:
                        restart_logged = True
                        log.info("%s: the daemon restarted mid-trace; waiting for its processes to report", h.host)
                    self._stop.wait(self.poll_s)
                    continue
                transient = isinstance(e, Unavailable | DeadlineExceeded)
                if not transient or now - failing_since >= self.unreachable_s:
                    self._fail_host(h, e.message, type(e).__name__, fetch_failure_of(e))
                    return
                self._stop.wait(self.poll_s)
                continue
            failing_since = None
            unreachable |= self._new_instance(h, status.instance_id)  # restarted, even if never seen down
            self._update(h, status)
            if self.fetcher is not None:
                self.fetcher.fetch_done(client, h)
            if status.finished:
                if unreachable and time.monotonic() < wait_end and self._may_report_after_restart(h):
                    # a restarted daemon knows the processes that have reported to it so far, one by one: the
                    # others may still be recording, or re-registering
                    self._stop.wait(self.poll_s)
                    continue
                with self._lock:
                    answers.mark_finished(h, unreachable)
                return
            now = time.monotonic()
            if now > wait_end and not self.owns_trace:
                self._stop_waiting(h)
                return
            if cancelled_at is None and now > wait_end:
                cancelled_at = now
                log.info("%s: traces not finished after %.0f s: cancelling", h.host, self.wait_s)
                try:
                    self._update(h, client.cancel_trace(self.trace_id), reason="cancelled by dyno-cli (--timeout-s)")
                except DynoError as e:
                    cause = f"not finished before --timeout-s, and cancel failed: {e.message}"
                    self._fail_host(h, cause, "Timeout", FetchFailure.TIMED_OUT)
                    return
                continue
            if cancelled_at is not None and now - cancelled_at > self.unreachable_s:
                self._fail_host(h, "not finished after being cancelled", "Timeout", FetchFailure.TIMED_OUT)
                return
            self._stop.wait(self.poll_s)

    def _may_report_after_restart(self, h: HostRecord) -> bool:
        with self._lock:
            return answers.may_report_after_restart(h)

    def _stop_waiting(self, h: HostRecord) -> None:
        """An attached trace still running at wait_s: not ours to cancel (see answers.stop_waiting)."""
        log.info("%s: traces not finished after %.0f s: no longer waiting (not cancelled)", h.host, self.wait_s)
        with self._lock:
            answers.stop_waiting(h, self.wait_s)

    def _update(self, h: HostRecord, status: dyno_pb2.TraceStatus, reason: str = "") -> None:
        """Merge a daemon's TraceStatus into `h`. `reason`: why we cancelled this host's trace; it stays the
        error of its cancelled processes (the daemon only ever says "cancelled by request")."""
        with self._lock:
            if reason:
                self._cancel_reasons[h.dir] = reason
            answers.merge_status(h, status, self._cancel_reasons.get(h.dir, ""), self.request)

    def _fail_host(self, h: HostRecord, error: str, error_type: str, failure: FetchFailure) -> None:
        with self._lock:
            answers.fail_host(h, error, error_type, failure)

    def _new_instance(self, h: HostRecord, instance_id: str) -> bool:
        """Whether the daemon that answered about the trace is another than the one before (DaemonInstances.note)."""
        return self._instances.note(h.dir, instance_id)

    def _restarted_mid_trace(self, client: DynoClient, h: HostRecord, e: DynoError) -> bool:
        return self._instances.restarted_mid_trace(client, h.dir, e)


# interrupt(): of its deadline, what is kept for closing the channels of daemons that did not answer (their threads
# then end at once), and the least a cancel is given (a grace_s below it still sends the cancels)
_CLOSE_RESERVE_S = 0.25
_MIN_CANCEL_S = 0.2
