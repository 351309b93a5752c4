"""Periodic profiling from dynod's configuration: its settings, or none when periodic_interval_s is 0."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dyno.daemon.config import DaemonConfig
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.profiling.periodic import PeriodicProfiler
from dyno.daemon.profiling.policy import PeriodicSettings
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager

__all__ = ["periodic_profiler", "periodic_settings"]


def periodic_settings(config: DaemonConfig) -> PeriodicSettings | None:
    """The periodic_* keys as settings; None when periodic profiling is off."""
    if not config.periodic_interval_s:
        return None
    return PeriodicSettings(
        interval_ms=round(config.periodic_interval_s * 1000),
        iterations=config.periodic_iterations,
        duration_ms=config.periodic_duration_ms,
        ranks_per_host=config.periodic_ranks_per_host,
        budget=config.periodic_budget,
        min_job_age_ms=round(config.periodic_min_job_age_s * 1000),
    )


def periodic_profiler(
    config: DaemonConfig,
    manager: TraceManager,
    registry: ProcessRegistry,
    job_records: Callable[[], Sequence[JobRecord]],
) -> PeriodicProfiler | None:
    """dynod's periodic profiler (not started), or None when it is off."""
    settings = periodic_settings(config)
    return None if settings is None else PeriodicProfiler(settings, manager, registry, job_records)
