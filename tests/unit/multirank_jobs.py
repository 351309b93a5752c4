"""Small generated jobs of several ranks, one file per rank, for the tests of the cross-rank step over rank parts
(trace_analysis.part_codec, host_summary, dyno-cli trace --summaries): GPU ranks (a GEMM, a NCCL all-reduce and a
device-wide synchronize per step) and CPU-only ranks (gloo all-reduce on the host, a slow DataLoader wait). A rank
whose step is longer than the others' is the planted straggler."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analysis_trace_builder import TraceBuilder

__all__ = ["cpu_job", "cpu_rank", "gpu_job", "gpu_rank"]

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
