"""What the trace manager asks of each protocol's side (agent_side.AgentSide, kineto_side.KinetoSide): the manager
picks the side by a process's protocol and never branches on the protocol itself.

Methods named "under the lock" run with the trace table's lock held; the others take it themselves, or read files
and /proc outside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.tracing.table import ProcTrace, TraceEntry

__all__ = ["FileNotes", "ProtocolSide"]

# (trace id, pid) -> what a side read from finished files outside the lock, for its checks under it
FileNotes = dict[tuple[str, int], str]


class ProtocolSide(Protocol):
    # why a process may not pick a request up, said when it timed out pending
    pending_hint: str

    def data_workers(self, procs: list[RegisteredProcess], *, fresh: bool) -> set[int]:
        """Pids of DataLoader workers among `procs` (never traced first under a process limit); /proc reads, outside
        the lock. `fresh`: read now (a trace request), else a recent answer may do (the process list)."""
        ...

    def new_part(self, trace: TraceEntry, p: RegisteredProcess) -> tuple[Path, str]:
        """Outside the lock: the output path of `p`'s part in `trace`, and its side's config for it ("" if none)."""
        ...

    def started(self, trace: TraceEntry, pt: ProcTrace) -> None:
        """Under the lock: the part was added to a new trace (a side that pushes requests sends it now)."""
        ...

    def cancel(self, trace: TraceEntry, pt: ProcTrace) -> str:
        """Under the lock: tell the process, if it can be told; returns the cancelled part's note."""
        ...

    def file_notes(self, pid: int | None = None, uid: int | None = None) -> FileNotes:
        """Outside the lock: what the parts' finished files say (of `pid`, or all), for check() and removed()."""
        ...

    def check(self, trace: TraceEntry, pt: ProcTrace, notes: FileNotes, now_ms: int) -> bool:
        """Under the lock, housekeeping of a part that has not ended: True when it ended now."""
        ...

    def deadline_reason(self, trace: TraceEntry, pt: ProcTrace, now_ms: int, hint: str) -> str:
        """Under the lock: why a part that picked the request up timed out at dynod's deadline."""
        ...

    def removed(self, trace: TraceEntry, pt: ProcTrace, reason: str, uid: int, notes: FileNotes) -> None:
        """Under the lock: the process's registration ended (`reason`) while its part had not; end it."""
        ...

    def outlives_registration(self, rec: RegisteredProcess) -> bool:
        """Outside the lock: whether a process whose registration ended may still write its trace's file (its
        leftovers wait until it is gone)."""
        ...

    def resume(self, trace: TraceEntry, pt: ProcTrace) -> str:
        """Under the lock, a part recovered from a record written before dynod restarted: "" when it goes on, else
        why it failed."""
        ...
