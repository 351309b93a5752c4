"""The values the agent's trace modules pass around: one trace request (AgentTraceSpec), its outcome (TraceResult) and
why it failed (TraceFailed)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AgentTraceSpec", "TraceResult", "TraceFailed", "exited_early_note", "now_ms"]


@dataclass(frozen=True)
class AgentTraceSpec:
    """One trace request as the agent runs it (converted from the proto TraceConfig)."""

    trace_id: str
    output_path: Path
    duration_ms: int | None = None
    iterations: int | None = None
    start_time_ms: int | None = None  # absolute unix ms
    start_iteration_roundup: int | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    deadline_ms: int = 0  # unix ms; 0: none given


@dataclass(frozen=True)
class TraceResult:
    path: Path
    size_bytes: int
    note: str = ""  # reported with DONE, e.g. why the trace is shorter than asked


def exited_early_note(recorded: str, requested: str) -> str:
    """The note of a trace cut short because the program exited normally during it ("2.1 s", "10 s")."""
    return (
        f"ended early: the program exited after {recorded} of the requested {requested}; "
        "the file holds what was recorded until then"
    )


class TraceFailed(Exception):
    """The trace could not be taken or written; str() is the reason reported to the daemon."""


def now_ms() -> int:
    return int(time.time() * 1000)
