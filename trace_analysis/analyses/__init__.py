"""Analyses: pure functions over the trace model, one module each, returning frozen dataclasses.

``temporal_breakdown``, ``idle_time_breakdown``, ``kernel_breakdown``, ``kernel_type_overlap``,
``comm_comp_overlap``, ``launch_stats``, ``queue_length``, ``memory_copies``, ``step_timings``, ``cpu_op_summary``
(one rank) and ``rank_spread``
(across ranks). Definitions follow HTA where HTA has the same figure (see docs/TRACE_ANALYSIS.md).
"""

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
