"""Starting a trace: on one daemon, safely retried (the StartTrace call ClusterTrace fans out, and tools may call
per host); on every host at once (StartFanout, ClusterTrace.start()'s fan-out); and the hints added to the daemons'
answers when a trace cannot be started or found."""

from __future__ import annotations

import threading
import time

from dyno.client.client import DynoClient
from dyno.client.cluster import Cluster
from dyno.client.errors import DeadlineExceeded, InvalidArgument, Unavailable
from dyno.client.reasons import is_reason
from dyno.client.trace import answers
from dyno.client.trace.records import HOST_FAILED, HostRecord
from dyno.client.trace.restarts import DaemonInstances
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

__all__ = ["IN_USE_HINT", "NOT_FOUND_HINT", "StartFanout", "start_trace_retrying"]

_START_RETRIES = 3
# Added to a daemon's NOT_FOUND for attach(). A restart alone does not lose a trace: a finished one left a record in
# its folder (daemon/tracing/journal.py) and is served from it; only one still running then is forgotten.
NOT_FOUND_HINT = (
    " (the id is unknown there: a wrong id or host, or the daemon restarted while the trace was still running; "
    "finished traces are kept across restarts until retention removes them)"
)
# Added to a daemon's "already in use" from start(): the usual cause with a new trace id is one daemon listed twice,
# under two names or addresses (gpu1 and its IP, localhost and 127.0.0.1): the other entry traced it.
IN_USE_HINT = (
    " (this daemon already has a trace with this id: a --trace-id used before, or the same daemon listed twice "
    "under different names or addresses, e.g. localhost and 127.0.0.1)"
)


def start_trace_retrying(c: DynoClient, request: dyno_pb2.TraceRequest) -> dyno_pb2.StartTraceResponse:
    """StartTrace with a caller-chosen trace id, retried on UNAVAILABLE within the client's deadline.

    DynoClient never retries StartTrace on its own (a retry after a lost reply would start a second trace), but a
    cold channel often fails to connect before the request is sent (hundreds of hosts dialled at once). With the
    caller's trace id a retry is safe: if an earlier attempt did reach the daemon, the retry is refused as
    "already in use" and the trace's state is read back instead."""
    if not request.trace_id:
        raise ValueError("start_trace_retrying needs request.trace_id")
    end = time.monotonic() + c.timeout_s
    attempt = 0
    while True:
        try:
            return c.start_trace(request)
        except Unavailable:
            attempt += 1
            backoff = 0.1 * 2 ** (attempt - 1)
            if attempt > _START_RETRIES or time.monotonic() + backoff >= end:
                raise
            time.sleep(backoff)
        except InvalidArgument as e:
            if not (attempt and _in_use(e.reason)):
                raise
            status = c.get_trace(request.trace_id)
            return dyno_pb2.StartTraceResponse(
                trace_id=status.trace_id,
                matched_pids=[p.pid for p in status.processes],
                triggered=status.processes,
                message="started (confirmed after a retry)",
                hostname=status.hostname,
            )


class StartFanout:
    """StartTrace on every host at once (start_trace_retrying on each), filling each host's record under the trace's
    `lock`: the processes it triggered, or the reason none.

    A host whose StartTrace got no answer in time may have started the trace all the same (a slow or lost reply):
    it is asked once with GetTrace, and followed like the others when it has the trace's processes. One that stays
    unanswered is kept in `unconfirmed` (host dirs, read under `lock`): interrupt() cancels there too."""

    def __init__(
        self,
        cluster: Cluster,
        request: dyno_pb2.TraceRequest,
        hosts: list[HostRecord],
        *,
        lock: threading.Lock,
        stop: threading.Event,
        instances: DaemonInstances,
    ) -> None:
        self._cluster = cluster
        self._request = request
        self._hosts = hosts
        self._lock = lock
        self._stop = stop
        self._instances = instances
        self.fanout_s = 0.0
        self.unconfirmed: set[str] = set()
        self._answered = threading.Event()
        self._answered.set()  # no StartTrace in flight
        self._error: Exception | None = None

    def run(self, started_monotonic: float) -> None:
        """The fan-out, on its own thread: a Ctrl-C here interrupts only the wait, and interrupt() then waits for the
        StartTrace calls still in flight (wait_answered()), so it can cancel what they started."""
        self._answered = threading.Event()
        threading.Thread(target=self._run, args=(started_monotonic,), name="trace-start", daemon=True).start()
        # An Event, not Thread.join(): CPython <= 3.12 marks a thread finished (is_alive() False, later joins
        # return at once) when a Ctrl-C interrupts a join() on it.
        self._answered.wait()
        if self._error is not None:
            raise self._error

    def wait_answered(self, timeout_s: float) -> None:
        """Wait until no StartTrace (nor its GetTrace confirmation) is in flight, at most `timeout_s`."""
        self._answered.wait(timeout_s)

    def _run(self, started_monotonic: float) -> None:
        try:
            self._fanout(started_monotonic)
        except Exception as e:  # handed to run(), as if the fan-out had run on its thread
            self._error = e
        finally:
            self._answered.set()

    def _fanout(self, started_monotonic: float) -> None:
        results = self._cluster.call(lambda c: start_trace_retrying(c, self._request))
        self.fanout_s = time.monotonic() - started_monotonic
        with self._lock:
            for h, r in zip(self._hosts, results, strict=True):
                h.start_s = round(r.elapsed_s, 4)
                if not r.ok or r.value is None:
                    h.state, h.error, h.error_type = HOST_FAILED, r.error or "", r.error_type or ""
                    if r.error_type == InvalidArgument.__name__ and _in_use(r.reason):
                        h.error += IN_USE_HINT
                    if r.error_type == DeadlineExceeded.__name__:
                        self.unconfirmed.add(h.dir)
                    continue
                resp: dyno_pb2.StartTraceResponse = r.value
                self._instances.set(h.dir, resp.instance_id)
                answers.apply_start(h, resp)
        self._confirm_unanswered()

    def _confirm_unanswered(self) -> None:
        """Ask each host whose StartTrace reply missed the deadline once with GetTrace, instead of leaving a trace
        running there unseen. Skipped once interrupted: interrupt() cancels there instead."""
        with self._lock:
            asked = [h for h in self._hosts if h.dir in self.unconfirmed]
        if not asked or self._stop.is_set():
            return
        trace_id = self._request.trace_id
        results = self._cluster.call(lambda c: c.get_trace(trace_id), hosts=[h.host for h in asked])
        with self._lock:
            for h, r in zip(asked, results, strict=True):
                status = r.value
                if status is None or not status.processes:
                    continue  # NOT_FOUND (it never started there), or no answer again: the host stays failed
                self._instances.set(h.dir, status.instance_id)
                answers.apply_confirmed_start(h, status)
                self.unconfirmed.discard(h.dir)


def _in_use(reason: str) -> bool:
    """Whether StartTrace was refused because the trace id is in use on that host."""
    return is_reason(reason, ErrorReason.TRACE_ID_IN_USE)
