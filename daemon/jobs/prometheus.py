"""Prometheus series of this host's jobs: the running ones, and the ended ones for EXPORT_ENDED_S after their end
(so that a scrape sees a short job's final totals), at most MAX_EXPORTED_JOBS of them.

Labelled `job_id` and `user` (and `host`; `simulated="true"` from the sim backend), never `job`: Prometheus sets
`job` to the scrape job and renames a target's own to `exported_job`. Cardinality: at most MAX_EXPORTED_JOBS x 14
series per host (running jobs first, the most GPU-seconds first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dyno.daemon.jobs.records import JobRecord

__all__ = ["EXPORT_ENDED_S", "MAX_EXPORTED_JOBS", "JOB_COUNTERS", "JOB_GAUGES", "job_families", "exported"]

EXPORT_ENDED_S = 300.0
MAX_EXPORTED_JOBS = 256

# name (without dyno_ and _total) -> (HELP, value); counters are exposed with the _total suffix
JOB_COUNTERS: dict[str, tuple[str, Callable[[JobRecord], float]]] = {
    "job_gpu_seconds": (
        "GPU-seconds the job held on this host (a shared GPU split between its jobs)",
        lambda r: r.gpu_seconds,
    ),
    "job_gpu_busy_seconds": ("GPU-seconds busy: NVML utilization x time", lambda r: r.busy_gpu_seconds),
    "job_sm_active_seconds": ("GPU-seconds SM-active (GPM), over job_gpm_seconds", lambda r: r.sm_active_gpu_seconds),
    "job_tensor_active_seconds": ("GPU-seconds tensor-active (GPM)", lambda r: r.tensor_active_gpu_seconds),
    "job_gpm_seconds": ("the GPU-seconds that had GPM values (SM-active measured)", lambda r: r.gpm_gpu_seconds),
    "job_energy_joules": ("energy of the job's GPUs (power x time, shared GPUs split)", lambda r: r.energy_joules),
    "job_cpu_seconds": ("host CPU-seconds of the job's processes", lambda r: r.cpu_seconds),
    "job_traces": ("traces started for the job's processes", lambda r: float(r.traces)),
}
JOB_GAUGES: dict[str, tuple[str, Callable[[JobRecord], float]]] = {
    "job_gpus_held": ("GPUs the job holds now on this host", lambda r: float(r.gpus_held)),
    "job_gpus_max": ("the most GPUs the job held at once on this host", lambda r: float(r.gpus_max)),
    "job_running": ("1 while the job runs on this host, 0 in the minutes after it ended", lambda r: float(r.running)),
    "job_start_timestamp_seconds": ("unix time the job was first seen on this host", lambda r: r.first_seen_ms / 1e3),
    "job_last_seen_timestamp_seconds": ("unix time the job was last seen on this host", lambda r: r.last_seen_ms / 1e3),
    "job_gpu_memory_max_bytes": (
        "GPU memory high-water mark of the job's processes",
        lambda r: float(r.gpu_memory_max_bytes),
    ),
}


def exported(running: Sequence[JobRecord], ended: Sequence[JobRecord]) -> list[JobRecord]:
    """The records to export: running ones first, then recently ended, each by GPU-seconds; at most the cap."""
    order = sorted(running, key=lambda r: -r.gpu_seconds) + sorted(ended, key=lambda r: -r.gpu_seconds)
    return order[:MAX_EXPORTED_JOBS]


def job_families(hostname: str, records: Sequence[JobRecord]) -> list[Metric]:
    simulated = any(r.simulated for r in records)
    labels = ["host", "job_id", "user", *(["simulated"] if simulated else [])]
    out: list[Metric] = []
    for table, cls in ((JOB_COUNTERS, CounterMetricFamily), (JOB_GAUGES, GaugeMetricFamily)):
        for name, (help_text, value) in table.items():
            family = cls("dyno_" + name, help_text, labels=labels)
            for r in records:
                family.add_metric([hostname, r.job_id, r.user, *(["true"] if simulated else [])], value(r))
            out.append(family)
    return out
