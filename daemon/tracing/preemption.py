"""On-demand wins over periodic profiling: an on-demand trace request that finds some of its processes in a periodic
trace (TraceSpec.periodic, dyno.daemon.profiling) cancels those parts and proceeds."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dyno.daemon.tracing.protocol import ProtocolSide
from dyno.daemon.tracing.table import ProcTrace, TraceEntry, TraceTable
from dyno.daemon.tracing.values import TraceReason, TraceState

__all__ = ["preempt_periodic"]


def preempt_periodic(
    table: TraceTable,
    side: Callable[[str], ProtocolSide],
    trace_id: str,
    active: Mapping[int, tuple[TraceEntry, ProcTrace]],
) -> dict[int, str]:
    """Under the table's lock: the periodic parts among `active` (pid -> the trace and part it is in, not ended:
    TraceTable.active_for) are cancelled (their agent is told to stop and discard; libkineto's file, if it still
    writes one, is ignored), with reason PREEMPTED_BY_ON_DEMAND. `side`: a protocol's side; `trace_id`: the
    on-demand trace's. Returns pid -> the periodic trace id of each."""
    out: dict[int, str] = {}
    for pid, (trace, pt) in active.items():
        if not trace.spec.periodic:
            continue
        side(pt.view.protocol).cancel(trace, pt)
        why = f"cancelled for on-demand trace {trace_id} of the same process (on-demand wins over periodic profiling)"
        table.set(trace, pt, TraceState.CANCELLED, why, reason=TraceReason.PREEMPTED_BY_ON_DEMAND)
        out[pid] = trace.trace_id
    return out
