"""A fake daemon whose trace's processes stay in one state until dyno-cli cancels them (its --timeout-s): for the
tests of what a cancelled process's reason says."""

from __future__ import annotations

import threading

from dyno.daemon.fake_server import FakeDynoServicer
from dyno.v1 import dyno_pb2

__all__ = ["RunsUntilCancelled"]


class RunsUntilCancelled(FakeDynoServicer):
    """Its processes stay in `state` (with the waiting note `waiting`) until cancelled; the cancel's answer keeps the
    note, as dynod does."""

    def __init__(self, state: int = dyno_pb2.TRACE_STATE_RUNNING, waiting: str = "") -> None:
        super().__init__("node0")
        self.cancelled = threading.Event()
        self.state, self.waiting = state, waiting

    def _status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        done = self.cancelled.is_set()
        procs = [
            dyno_pb2.ProcessTrace(
                pid=p.pid,
                protocol=p.protocol,
                state=dyno_pb2.TRACE_STATE_CANCELLED if done else self.state,
                error="cancelled by request" if done else "",
                waiting=self.waiting,
            )
            for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=procs, finished=done, hostname=self.hostname)

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return self._status(request.trace_id)

    def CancelTrace(self, request, context):  # noqa: N802
        self.cancelled.set()
        return self._status(request.trace_id)
