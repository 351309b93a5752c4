"""The dyno agent side of the trace manager: each agent's Watch stream has a command queue; the agent reports its
trace running, done (believed only when the file is there) or failed."""

from __future__ import annotations

import queue
from pathlib import Path

from dyno.daemon.trace_table import ProcTrace, TraceEntry, TraceTable
from dyno.daemon.trace_types import (
    AgentCommand,
    AgentTraceCommand,
    TraceRequestError,
    TraceState,
    UnknownTraceError,
)

__all__ = ["AgentTraces"]


class AgentTraces(TraceTable):
    """What dyno.daemon.agent_service calls: attach and detach a Watch stream, delivered, report."""

    def agent_attach(self, pid: int, session_id: str) -> queue.Queue[AgentCommand | None]:
        """A Watch stream opened: its queue, preloaded with this pid's undelivered trace, if any."""
        q: queue.Queue[AgentCommand | None] = queue.Queue()
        with self._lock:
            self._agent_queues[pid] = (session_id, q)
            found = self._active_for(pid)
            if found is not None and found[1].view.state == TraceState.PENDING:
                q.put(self._agent_command(*found))
        return q

    def agent_detach(self, pid: int, session_id: str) -> None:
        with self._lock:
            cur = self._agent_queues.get(pid)
            if cur is not None and cur[0] == session_id:
                del self._agent_queues[pid]

    def _send_agent(self, pid: int, command: AgentCommand) -> None:
        entry = self._agent_queues.get(pid)
        if entry is not None:
            entry[1].put(command)

    def _agent_command(self, trace: TraceEntry, pt: ProcTrace) -> AgentTraceCommand:
        deadline = self._completion_deadline(trace.spec, pt.created_ms + self._delivery_timeout_ms)
        return AgentTraceCommand(trace.trace_id, trace.spec, Path(pt.view.path), deadline)

    def agent_delivered(self, pid: int, trace_id: str) -> None:
        with self._lock:
            trace = self._traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if trace is None or pt is None or pt.view.state != TraceState.PENDING:
                return
            now = self._clock_ms()
            pt.delivered_ms = now
            pt.deadline_ms = self._completion_deadline(trace.spec, now)
            self._set(trace, pt, TraceState.DELIVERED)

    def agent_report(self, pid: int, trace_id: str, state: TraceState, error: str = "") -> None:
        """RUNNING, DONE or FAILED from the agent; DONE is believed only when the assigned file is there. `error`:
        FAILED's reason, or an optional note with DONE (kept in the process's error field)."""
        with self._lock:
            trace = self._traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if trace is None or pt is None:
                raise UnknownTraceError(f"no trace {trace_id!r} for pid {pid}")
            if state == TraceState.RUNNING:
                if pt.view.state in (TraceState.PENDING, TraceState.DELIVERED):
                    self._set(trace, pt, TraceState.RUNNING)
            elif state == TraceState.DONE:
                try:
                    size = Path(pt.view.path).stat().st_size
                except OSError:
                    self._set(trace, pt, TraceState.FAILED, f"agent reported done but {pt.view.path} is missing")
                else:
                    # A done trace's text is a note, not a failure (e.g. it ended early: the program exited).
                    self._set(trace, pt, TraceState.DONE, error, size=size)
            elif state == TraceState.FAILED:
                self._set(trace, pt, TraceState.FAILED, error or "agent reported failure without a reason")
            else:
                raise TraceRequestError("state", f"an agent reports running, done or failed, not {state.value}")
        self._write_records()
