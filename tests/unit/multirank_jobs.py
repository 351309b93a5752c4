"""Small generated jobs of several ranks, one file per rank, for the tests of the cross-rank step over rank parts
(trace_analysis.part_codec, host_summary, dyno-cli trace --summaries): GPU ranks (a GEMM, a NCCL all-reduce and a
device-wide synchronize per step) and CPU-only ranks (gloo all-reduce on the host, a slow DataLoader wait). A rank
whose step is longer than the others' is the planted straggler.

``many_rank_report``: the job-wide report of a job of any number of ranks, made as ``dyno-cli trace --summaries``
makes it (the cross-rank step over rank parts), from a few analysed GPU ranks renumbered (as bench/summary_merge.py
makes its 1,024)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from analysis_trace_builder import TraceBuilder
from msgspec.structs import replace

if TYPE_CHECKING:
    from dyno.trace_analysis.api import RankPart
    from dyno.trace_analysis.report.model import Report

__all__ = ["cpu_job", "cpu_rank", "gpu_job", "gpu_rank", "many_rank_report", "renumbered"]

STEPS = 3


def gpu_rank(path: Path, rank: int, world: int, step_us: float) -> Path:
    b = TraceBuilder(rank=rank, world_size=world)
    for i in range(STEPS):
        t0 = i * step_us
        b.step(i, t0, step_us)
        b.cpu("aten::mm", t0 + 10.0, 50.0)
        b.launch("void cutlass_gemm_kernel()", t0 + 20.0, t0 + 100.0, 0.3 * step_us)
        b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", t0 + 40.0, t0 + 0.4 * step_us, 50_000.0)
        b.runtime("cudaDeviceSynchronize", t0 + 60.0, 0.2 * step_us)
    return b.write(path)


def cpu_rank(path: Path, rank: int, world: int, step_us: float, wait_us: float = 60_000.0) -> Path:
    """A CPU-only rank: each step waits ``wait_us`` for its batch (DataLoader, single-process), computes for the rest,
    and waits in a gloo all-reduce for the slowest rank (``wait_us`` of the slowest rank's extra step time)."""
    b = TraceBuilder(rank=rank, world_size=world, capability=None, backend="gloo")
    for i in range(STEPS):
        t0 = i * step_us
        b.step(i, t0, step_us)
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 1.0, wait_us)
        b.cpu("aten::mm", t0 + wait_us + 10.0, 0.3 * step_us)
        b.cpu("aten::add_", t0 + wait_us + 0.3 * step_us + 20.0, 100.0)
        b.cpu("gloo:all_reduce", t0 + 0.8 * step_us, 0.15 * step_us)
    return b.write(path)


def gpu_job(folder: Path, steps_us: Sequence[float]) -> Path:
    for r, s in enumerate(steps_us):
        gpu_rank(folder / f"rank-{r}.json", r, len(steps_us), s)
    return folder


def cpu_job(folder: Path, steps_us: Sequence[float]) -> Path:
    for r, s in enumerate(steps_us):
        cpu_rank(folder / f"rank-{r}.json", r, len(steps_us), s)
    return folder


def renumbered(part: RankPart, rank: int) -> RankPart:
    """``part`` as rank ``rank``'s (its summary, outcomes, findings and digest say the new rank)."""
    rules = tuple(
        (replace(o, rank=rank), tuple(replace(f, rank=rank) if f.rank is not None else f for f in fs))
        for o, fs in part.rules
    )
    digest = part.digest
    if digest is not None:
        digest = replace(digest, rank=rank, timing=digest.timing and replace(digest.timing, rank=rank))
    return replace(part, rank=rank, summary=replace(part.summary, rank=rank), rules=rules, digest=digest)


def many_rank_report(folder: Path, ranks: int, slow: int, steps_us: Sequence[float] = (100_000.0, 101_000.0)) -> Report:
    """The report of ``ranks`` GPU ranks merged from their parts: rank r is ``steps_us[r % len(steps_us)]``'s rank
    renumbered, rank ``slow`` a rank 60% slower than the first."""
    from dyno.trace_analysis.api import analyze_rank, report_of
    from dyno.trace_analysis.loader import load_traces
    from dyno.trace_analysis.rules import select_rules
    from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

    gpu_job(folder, [*steps_us, 1.6 * steps_us[0]])
    rules, resolved = select_rules(None), resolve_rule_thresholds(None)
    bases = [analyze_rank(t, rules, resolved) for t in load_traces([str(folder)])]
    bases.sort(key=lambda p: p.rank)
    parts = [renumbered(bases[-1] if r == slow else bases[r % len(steps_us)], r) for r in range(ranks)]
    return report_of(parts, rules, resolved, [], [f"host{r // 8}:rank-{r}.json" for r in range(ranks)])
