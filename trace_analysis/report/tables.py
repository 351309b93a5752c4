"""HTA's per-rank tables in the report (JSON schema v2, docs/ANALYSIS_REPORT.md): the per-stream idle-time
breakdown, the kernel-type breakdown with its overlap categories, CUDA kernel launch statistics and the launch
queue-length summary. Values only; ``summary.gpu_tables`` fills them from the analyses."""

from __future__ import annotations

import math

import msgspec
import numpy as np

__all__ = [
    "Distribution",
    "GpuTables",
    "KernelTypeRow",
    "KernelTypeTable",
    "LaunchTable",
    "QueueRow",
    "StreamIdleRow",
    "IdleTable",
    "describe",
]


class Distribution(msgspec.Struct, frozen=True):
    """pandas' ``describe()`` of a series, as HTA reports its tables: ``std`` with ddof 1 (None for fewer than 2
    values), quartiles by linear interpolation; all None but ``count`` for an empty series."""

    count: int
    mean: float | None
    std: float | None
    min: float | None
    p25: float | None
    p50: float | None
    p75: float | None
    max: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "p25": self.p25,
            "p50": self.p50,
            "p75": self.p75,
            "max": self.max,
        }


def describe(values: np.ndarray) -> Distribution:
    n = len(values)
    if not n:
        return Distribution(0, None, None, None, None, None, None, None)
    a = np.sort(np.asarray(values, dtype=np.float64))
    # np.percentile's (and pandas') linear interpolation, written out: np.percentile imports numpy.ma (~8 ms)
    h = (n - 1) * np.array((0.0, 0.25, 0.5, 0.75, 1.0))
    lo = np.floor(h).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    q = (a[lo] + (h - lo) * (a[hi] - a[lo])).tolist()
    std = float(a.std(ddof=1)) if n > 1 else None
    return Distribution(n, float(a.mean()), std if std is None or math.isfinite(std) else None, *q)


class StreamIdleRow(msgspec.Struct, frozen=True):
    device: int
    stream: int
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    gaps: int
    host_wait_gaps: int
    kernel_wait_gaps: int

    def to_dict(self) -> dict[str, object]:
        idle = self.host_wait_us + self.kernel_wait_us + self.other_us
        parts = {"host_wait": self.host_wait_us, "kernel_wait": self.kernel_wait_us, "other": self.other_us}
        return {
            "device": self.device,
            "stream": self.stream,
            "idle_us": idle,
            **{f"{k}_us": v for k, v in parts.items()},
            # HTA's idle_time_ratio: of the stream's idle time
            **{f"{k}_share": (v / idle if idle > 0 else 0.0) for k, v in parts.items()},
            "gaps": self.gaps,
            "host_wait_gaps": self.host_wait_gaps,
            "kernel_wait_gaps": self.kernel_wait_gaps,
            "other_gaps": self.gaps - self.host_wait_gaps - self.kernel_wait_gaps,
        }


class IdleTable(msgspec.Struct, frozen=True):
    consecutive_kernel_delay_us: float
    streams: tuple[StreamIdleRow, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "consecutive_kernel_delay_us": self.consecutive_kernel_delay_us,
            "streams": [s.to_dict() for s in self.streams],
        }


class KernelTypeRow(msgspec.Struct, frozen=True):
    kernel_type: str
    us: float
    share: float

    def to_dict(self) -> dict[str, object]:
        return {"kernel_type": self.kernel_type, "us": self.us, "share": self.share}


class KernelTypeTable(msgspec.Struct, frozen=True):
    total_us: float
    rows: tuple[KernelTypeRow, ...]

    def to_dict(self) -> dict[str, object]:
        return {"total_us": self.total_us, "types": [r.to_dict() for r in self.rows]}


class LaunchTable(msgspec.Struct, frozen=True):
    launches: int
    runtime_cutoff_us: float
    launch_delay_cutoff_us: float
    short_kernels: int
    runtime_outliers: int
    delay_outliers: int
    cpu_duration_us: Distribution
    gpu_duration_us: Distribution
    launch_delay_us: Distribution

    def to_dict(self) -> dict[str, object]:
        return {
            "launches": self.launches,
            "runtime_cutoff_us": self.runtime_cutoff_us,
            "launch_delay_cutoff_us": self.launch_delay_cutoff_us,
            "short_kernels": self.short_kernels,
            "runtime_outliers": self.runtime_outliers,
            "delay_outliers": self.delay_outliers,
            "cpu_duration_us": self.cpu_duration_us.to_dict(),
            "gpu_duration_us": self.gpu_duration_us.to_dict(),
            "launch_delay_us": self.launch_delay_us.to_dict(),
        }


class QueueRow(msgspec.Struct, frozen=True):
    device: int
    stream: int
    length: Distribution  # over the step function's points (+1 at a launch, -1 at its GPU start), as HTA

    def to_dict(self) -> dict[str, object]:
        return {"device": self.device, "stream": self.stream, **self.length.to_dict()}


class GpuTables(msgspec.Struct, frozen=True):
    idle_time: IdleTable
    kernel_types: KernelTypeTable
    launch: LaunchTable
    queue: tuple[QueueRow, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "idle_time_breakdown": self.idle_time.to_dict(),
            "kernel_type_breakdown": self.kernel_types.to_dict(),
            "kernel_launch_stats": self.launch.to_dict(),
            "queue_length_summary": [q.to_dict() for q in self.queue],
        }
