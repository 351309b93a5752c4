"""Analyses: pure functions over the trace model, one module each, returning frozen msgspec Structs.

``temporal_breakdown``, ``idle_time_breakdown``, ``kernel_breakdown``, ``kernel_type_overlap``,
``comm_comp_overlap``, ``launch_stats``, ``queue_length``, ``memory_copies``, ``step_timings``, ``cpu_op_summary``
(one rank) and ``rank_spread``
(across ranks). Definitions follow HTA where HTA has the same figure (see docs/TRACE_ANALYSIS.md).

Each name is loaded from its module on first use: a run imports the analyses it calls (a module that imports
``analyses.arrays`` runs this file first, so it must import nothing itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dyno.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from dyno.trace_analysis.analyses.cpu_ops import CpuOpSummary, OpStat, cpu_op_summary
    from dyno.trace_analysis.analyses.gpu import GpuScope, KernelType, gpu_scope, kernel_types
    from dyno.trace_analysis.analyses.idle_time import IdleTimeBreakdown, StreamIdle, idle_time_breakdown
    from dyno.trace_analysis.analyses.kernel_overlap import KernelTypeOverlap, KernelTypeShare, kernel_type_overlap
    from dyno.trace_analysis.analyses.kernels import KernelBreakdown, KernelStat, KernelTypeTime, kernel_breakdown
    from dyno.trace_analysis.analyses.launch import LaunchStats, QueueLength, launch_stats, queue_length
    from dyno.trace_analysis.analyses.memcpy import CopyKind, MemoryCopies, memory_copies
    from dyno.trace_analysis.analyses.overlap import CommCompOverlap, comm_comp_overlap
    from dyno.trace_analysis.analyses.ranks import RankSpread, RankTiming, rank_spread
    from dyno.trace_analysis.analyses.steps import Step, StepStats, step_timings
    from dyno.trace_analysis.analyses.temporal import TemporalBreakdown, temporal_breakdown

__all__ = [
    "CommCompOverlap",
    "CopyKind",
    "CpuOpSummary",
    "GpuScope",
    "IdleTimeBreakdown",
    "KernelBreakdown",
    "KernelStat",
    "KernelType",
    "KernelTypeOverlap",
    "KernelTypeShare",
    "KernelTypeTime",
    "LaunchStats",
    "MemoryCopies",
    "OpStat",
    "QueueLength",
    "RankSpread",
    "RankTiming",
    "Step",
    "StepStats",
    "StreamIdle",
    "TemporalBreakdown",
    "comm_comp_overlap",
    "cpu_op_summary",
    "gpu_scope",
    "idle_time_breakdown",
    "kernel_breakdown",
    "kernel_type_overlap",
    "kernel_types",
    "launch_stats",
    "memory_copies",
    "queue_length",
    "rank_spread",
    "step_timings",
    "temporal_breakdown",
]

# the submodule that defines each public name
_HOME = {
    "CpuOpSummary": "cpu_ops",
    "OpStat": "cpu_ops",
    "cpu_op_summary": "cpu_ops",
    "GpuScope": "gpu",
    "KernelType": "gpu",
    "gpu_scope": "gpu",
    "kernel_types": "gpu",
    "IdleTimeBreakdown": "idle_time",
    "StreamIdle": "idle_time",
    "idle_time_breakdown": "idle_time",
    "KernelTypeOverlap": "kernel_overlap",
    "KernelTypeShare": "kernel_overlap",
    "kernel_type_overlap": "kernel_overlap",
    "KernelBreakdown": "kernels",
    "KernelStat": "kernels",
    "KernelTypeTime": "kernels",
    "kernel_breakdown": "kernels",
    "LaunchStats": "launch",
    "QueueLength": "launch",
    "launch_stats": "launch",
    "queue_length": "launch",
    "CopyKind": "memcpy",
    "MemoryCopies": "memcpy",
    "memory_copies": "memcpy",
    "CommCompOverlap": "overlap",
    "comm_comp_overlap": "overlap",
    "RankSpread": "ranks",
    "RankTiming": "ranks",
    "rank_spread": "ranks",
    "Step": "steps",
    "StepStats": "steps",
    "step_timings": "steps",
    "TemporalBreakdown": "temporal",
    "temporal_breakdown": "temporal",
}

__getattr__ = lazy_getattr(__name__, _HOME)
