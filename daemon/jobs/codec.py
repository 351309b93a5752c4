"""JobRecord <-> dyno.v1 JobRecord: the wire message is also how the job database stores a record (its `data`
column), so a field added to both needs no migration and a page of ListJobs is parsed in C, not field by field."""

from __future__ import annotations

from dyno.daemon.jobs.records import JobRecord
from dyno.v1 import dyno_pb2

__all__ = ["record_to_proto", "record_from_proto"]


def record_to_proto(r: JobRecord) -> dyno_pb2.JobRecord:
    return dyno_pb2.JobRecord(
        job_id=r.job_id,
        user=r.user,
        hostname=r.hostname,
        first_seen_ms=r.first_seen_ms,
        last_seen_ms=r.last_seen_ms,
        running=r.running,
        gpus_held=r.gpus_held,
        gpus_max=r.gpus_max,
        gpu_indices=r.gpu_indices,
        gpu_seconds=r.gpu_seconds,
        busy_gpu_seconds=r.busy_gpu_seconds,
        sm_active_gpu_seconds=r.sm_active_gpu_seconds,
        tensor_active_gpu_seconds=r.tensor_active_gpu_seconds,
        gpm_gpu_seconds=r.gpm_gpu_seconds,
        gpu_memory_max_bytes=r.gpu_memory_max_bytes,
        energy_joules=r.energy_joules,
        cpu_seconds=r.cpu_seconds,
        ranks=r.ranks,
        pids=r.pids,
        pid_count=r.pid_count,
        traces=r.traces,
        source=r.source,
        simulated=r.simulated,
        record_id=r.record_id,
    )


def record_from_proto(m: dyno_pb2.JobRecord) -> JobRecord:
    return JobRecord(
        job_id=m.job_id,
        user=m.user,
        hostname=m.hostname,
        first_seen_ms=m.first_seen_ms,
        last_seen_ms=m.last_seen_ms,
        running=m.running,
        gpus_held=m.gpus_held,
        gpus_max=m.gpus_max,
        gpu_indices=tuple(m.gpu_indices),
        gpu_seconds=m.gpu_seconds,
        busy_gpu_seconds=m.busy_gpu_seconds,
        sm_active_gpu_seconds=m.sm_active_gpu_seconds,
        tensor_active_gpu_seconds=m.tensor_active_gpu_seconds,
        gpm_gpu_seconds=m.gpm_gpu_seconds,
        gpu_memory_max_bytes=m.gpu_memory_max_bytes,
        energy_joules=m.energy_joules,
        cpu_seconds=m.cpu_seconds,
        ranks=tuple(m.ranks),
        pids=tuple(m.pids),
        pid_count=m.pid_count,
        traces=m.traces,
        source=m.source,
        simulated=m.simulated,
        record_id=m.record_id,
    )
