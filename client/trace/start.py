"""Starting one trace on one daemon, safely retried: the StartTrace call ClusterTrace fans out (and tools may call
per host), and the hints added to the daemons' answers when a trace cannot be started or found."""

from __future__ import annotations

import time

from dyno.client.client import DynoClient
from dyno.client.errors import InvalidArgument, Unavailable
from dyno.client.reasons import is_reason
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

__all__ = ["IN_USE_HINT", "NOT_FOUND_HINT", "start_trace_retrying"]

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
            if not (attempt and is_reason(e.reason, ErrorReason.TRACE_ID_IN_USE)):
                raise
            status = c.get_trace(request.trace_id)
            return dyno_pb2.StartTraceResponse(
                trace_id=status.trace_id,
                matched_pids=[p.pid for p in status.processes],
                triggered=status.processes,
                message="started (confirmed after a retry)",
                hostname=status.hostname,
            )
