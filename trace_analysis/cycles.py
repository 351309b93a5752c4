"""Profiling cycles: several files written by one process, one per cycle, are not several ranks.

``torch.profiler.schedule(..., repeat=N)`` (or ``repeat=0``) with ``on_trace_ready=tensorboard_trace_handler(dir)``
writes one file per active cycle into the same folder, named ``<worker>.<time_ns>.pt.trace.json[.gz]``. Loaded as a
folder of ranks, the cycles of a process without ``torch.distributed`` became ranks 0, 1, 2, ... of one job (and a
cross-rank straggler comparison of one process with itself), and the cycles of a distributed rank became
"duplicate rank" errors keeping the *first* cycle (the one nearest start-up, the least representative).

A group of files is the cycles of one process when they have the same rank (from ``distributedInfo`` or the file
name) or, without a rank, the same host name and main pid, and their time spans (absolute: ``baseTimeNanoseconds``
plus ``ts``) do not overlap. The latest cycle is analysed (the steady state, after warm-up cycles; on every rank the
same cycle, as all ranks step together); each earlier one is reported with why and how to analyse it. When one
rank has fewer cycles (it stopped early, or files are missing), every rank is analysed over the latest cycle that
rank has, so that they are compared over the same steps. Files of
one process with the same span and number of events are one recording twice (``t.json`` and its copy
``t.json.gz``): analysed once. Without a rank or a host name nothing is grouped (pids alone collide across hosts).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from dyno.trace_analysis.model import Cat, LoadError, Trace

__all__ = ["identity", "abs_span_us", "split_cycles", "other_process"]

logger = logging.getLogger(__name__)

# host-side rows: their pid is the traced process (GPU rows carry the device as pid)
_HOST_CATS = np.array([Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.PYTHON_FUNCTION, Cat.CUDA_RUNTIME], dtype=np.int8)


def _main_pid(trace: Trace) -> int | None:
    """The pid with the most host-side rows (a DataLoader worker or a second process may add a few), else None."""
    ev = trace.events
    pid = ev.pid[np.isin(ev.cat, _HOST_CATS)]
    pid = pid[pid >= 0]  # string pids ("Spans") are labels, not processes
    if not len(pid):
        return None
    values, counts = np.unique(pid, return_counts=True)
    return int(values[counts.argmax()])


def identity(trace: Trace) -> tuple[object, ...] | None:
    """What says two files were recorded by the same process: its rank when the trace or file name gives one, else
    (host name, main pid); None when neither is known (no host name or no host-side rows)."""
    if trace.meta.rank_source in ("distributedInfo", "filename"):
        return ("rank", trace.meta.rank)
    if not trace.meta.host_name:  # pids alone collide across hosts (containers: the same few small pids)
        return None
    pid = _main_pid(trace)
    return None if pid is None else ("process", trace.meta.host_name, pid)


def abs_span_us(trace: Trace) -> tuple[float, float] | None:
    """(start, end) in µs, shifted by ``baseTimeNanoseconds`` when the trace has it (Kineto writes ``ts`` relative
    to it: the files of one process share it, those of different hosts do not); None without events."""
    if not len(trace.events):
        return None
    start, end = trace.span
    base = (trace.meta.base_time_ns or 0) / 1000.0
    return (start + base, end + base)


def other_process(a: Trace, b: Trace) -> str | None:
    """How ``b`` shows it was recorded by another process than ``a`` (another host or main pid), else None."""
    if a.meta.host_name and b.meta.host_name and a.meta.host_name != b.meta.host_name:
        return f"host {b.meta.host_name}, not {a.meta.host_name}"
    pa, pb = _main_pid(a), _main_pid(b)
    return f"pid {pb}, not {pa}" if pa is not None and pb is not None and pa != pb else None


def _who(key: tuple[object, ...]) -> str:
    if key[0] == "rank":
        return f"rank {key[1]}"
    host = f" on host {key[1]}" if key[1] is not None else ""
    return f"process {key[2]}{host}"


def _one_process(traces: list[Trace]) -> bool:
    """Whether the files of one rank can be one process's cycles: no two name different hosts or main pids (unrelated
    traces that each say rank 0, gathered in one folder, are not cycles of rank 0)."""
    hosts = {t.meta.host_name for t in traces if t.meta.host_name}
    pids = {p for p in map(_main_pid, traces) if p is not None}
    return len(hosts) <= 1 and len(pids) <= 1


def split_cycles(traces: list[Trace]) -> tuple[list[Trace], list[LoadError]]:
    """``traces`` (path order) without the profiling cycles not analysed, and a ``LoadError`` for each one left out.
    Groups whose spans overlap are left as they are (the rank logic reports two files of one rank), except copies
    of one unranked recording (same host, pid, span and event count), reported as such."""
    if len(traces) < 2:  # the common case: nothing to compare, and no numpy first-call costs on a small trace
        return traces, []
    groups: dict[tuple[object, ...], list[int]] = {}
    spans: list[tuple[float, float]] = []
    for i, t in enumerate(traces):
        span = abs_span_us(t)
        spans.append(span or (0.0, 0.0))
        key = identity(t)
        if key is not None and span is not None:
            groups.setdefault(key, []).append(i)
    drop: dict[int, str] = {}
    cycles: dict[tuple[object, ...], list[int]] = {}  # per process, its files in time order, when they are cycles
    for key, rows in groups.items():
        by_start = sorted(rows, key=lambda i: spans[i])
        successive = all(spans[b][0] >= spans[a][1] for a, b in zip(by_start, by_start[1:], strict=False))
        if successive and (len(rows) == 1 or _one_process([traces[i] for i in rows])):
            cycles[key] = by_start
        elif key[0] == "process":
            # a copy (t.json and t.json.gz): the same span to the bit and the same number of events
            first = traces[rows[0]]
            for i in rows[1:]:
                if spans[i] == spans[rows[0]] and len(traces[i].events) == len(first.events):
                    drop[i] = (
                        f"the same recording as {first.meta.path} ({_who(key)}, same time span and events; a "
                        "copy of it): analysed once, not as another rank"
                    )
    chosen = _aligned(cycles, spans)
    for key, rows in cycles.items():
        keep = chosen.get(key, rows[-1])
        kept = f"the latest cycle{'' if keep == rows[-1] else ' every rank has'}, {Path(traces[keep].meta.path).name}"
        for i in rows:
            if i == keep:
                continue
            if spans[i][0] < spans[keep][0]:
                drop[i] = (
                    f"an earlier profiling cycle of {_who(key)} (its {len(rows)} files cover successive times, as "
                    f"torch.profiler schedule(repeat=...) with tensorboard_trace_handler writes them; not "
                    f"{len(rows)} ranks): {kept}, is analysed; give this file alone to analyse this cycle"
                )
            else:
                drop[i] = (
                    f"a later profiling cycle of {_who(key)} than another rank's last file: the ranks are compared "
                    f"over {kept}; give this file alone to analyse this cycle"
                )
    if drop:
        logger.debug("left out %d file(s): other profiling cycles or copies", len(drop))
    kept_traces = [t for i, t in enumerate(traces) if i not in drop]
    errors = [LoadError(traces[i].meta.path, reason) for i, reason in sorted(drop.items())]
    return kept_traces, errors


def _aligned(
    cycles: dict[tuple[object, ...], list[int]], spans: list[tuple[float, float]]
) -> dict[tuple[object, ...], int]:
    """Per rank with several cycles, the one to analyse so that every rank is seen over the same steps: the latest
    that overlaps the last cycle of the rank whose last cycle is earliest (a rank that stopped early, or whose later
    files are missing). Ranks step together, so their cycles overlap in time (clocks permitting: without an
    overlapping cycle, a rank keeps its latest). Only when the ranks have different numbers of cycles."""
    ranked = {k: rows for k, rows in cycles.items() if k[0] == "rank"}
    # as many cycles on every rank: the latest ones match, whatever the hosts' clocks say
    if len(ranked) < 2 or len({len(rows) for rows in ranked.values()}) == 1:
        return {}
    lo, hi = min((spans[rows[-1]] for rows in ranked.values()), key=lambda s: s[0])
    out = {}
    for key, rows in ranked.items():
        overlapping = [i for i in rows if spans[i][0] < hi and spans[i][1] > lo]
        out[key] = overlapping[-1] if overlapping else rows[-1]
    return out
