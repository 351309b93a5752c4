"""Per-job records of one host, accumulated from each sampling tick's observation.

A GPU held by several jobs in a tick is shared between them equally (its seconds, busy seconds and energy), so that
the GPU-seconds of a host's jobs never add up to more than its GPUs' wall time. A job ends when none of its
processes has been seen for `grace_s`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from dyno.daemon.jobs.attribution import JobIdentity

__all__ = ["MAX_LISTED", "GpuTick", "ProcTick", "Observation", "JobRecord", "JobBook"]

MAX_LISTED = 64  # pids, ranks and GPU indices a record lists; the counts go on past it
# pids a running job remembers to count each process once (beyond it, a process past the first MAX_COUNTED is
# counted again when seen again after a change); a restarted dynod remembers the listed ones only
MAX_COUNTED = 16384


@dataclass(frozen=True, slots=True)
class GpuTick:
    """One GPU's values at a tick (None: not available on this GPU)."""

    index: int
    utilization_percent: float | None = None
    sm_active_percent: float | None = None
    tensor_active_percent: float | None = None
    power_watts: float | None = None


@dataclass(frozen=True, slots=True)
class ProcTick:
    """One process seen at a tick: its job, the GPUs it holds memory on, and the CPU it used since the last tick.
    (How much GPU memory it holds is in Observation.gpu_memory: it changes from tick to tick, the rest seldom.)"""

    pid: int
    job: JobIdentity
    gpus: tuple[int, ...] = ()
    cpu_seconds: float = 0.0  # since the last tick
    rank: int | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    timestamp_ms: int
    interval_s: float  # the wall time this tick accounts for
    gpus: Mapping[int, GpuTick]
    procs: tuple[ProcTick, ...]
    traces: Mapping[tuple[str, str], int] = field(default_factory=dict)  # traces taken since the last tick per job
    gpu_memory: Mapping[int, int] = field(default_factory=dict)  # pid -> GPU memory bytes it holds (absent: none)


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job's use of one host. Seconds are GPU-seconds (a GPU held for a second is one)."""

    job_id: str
    user: str
    hostname: str
    first_seen_ms: int
    last_seen_ms: int
    running: bool
    gpus_held: int = 0  # at the last tick
    gpus_max: int = 0  # the most held at once
    gpu_indices: tuple[int, ...] = ()
    gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0  # utilization x interval
    sm_active_gpu_seconds: float = 0.0
    tensor_active_gpu_seconds: float = 0.0
    gpm_gpu_seconds: float = 0.0  # the GPU-seconds that had SM-active values (GPM); == gpu_seconds: all of them
    gpu_memory_max_bytes: int = 0
    energy_joules: float = 0.0
    cpu_seconds: float = 0.0
    ranks: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    pid_count: int = 0
    traces: int = 0
    source: str = ""  # attribution.Source value of its first process
    simulated: bool = False
    record_id: int = 0  # the store's row id; 0: not stored yet

    @property
    def key(self) -> tuple[str, str]:
        return (self.job_id, self.user)


class _Acc:
    """A running job's mutable totals (owned by the JobBook, on the sampling thread only)."""

    __slots__ = (
        "rec",
        "gpus",
        "ranks",
        "pids",
        "counted",
        "pid_count",
        "gpu_seconds",
        "busy",
        "sm",
        "tensor",
        "gpm",
        "mem_max",
        "energy",
        "cpu",
        "traces",
        "gpus_held",
        "gpus_max",
        "last_seen_ms",
    )

    def __init__(self, rec: JobRecord) -> None:
        self.rec = rec
        self.gpus = set(rec.gpu_indices)
        self.ranks = set(rec.ranks)
        self.pids = set(rec.pids)
        self.counted = set(rec.pids)  # every pid counted in pid_count (up to MAX_COUNTED)
        self.pid_count = rec.pid_count
        self.gpu_seconds = rec.gpu_seconds
        self.busy = rec.busy_gpu_seconds
        self.sm = rec.sm_active_gpu_seconds
        self.tensor = rec.tensor_active_gpu_seconds
        self.gpm = rec.gpm_gpu_seconds
        self.mem_max = rec.gpu_memory_max_bytes
        self.energy = rec.energy_joules
        self.cpu = rec.cpu_seconds
        self.traces = rec.traces
        self.gpus_held = rec.gpus_held
        self.gpus_max = rec.gpus_max
        self.last_seen_ms = rec.last_seen_ms

    def record(self, running: bool) -> JobRecord:
        return replace(
            self.rec,
            last_seen_ms=self.last_seen_ms,
            running=running,
            gpus_held=self.gpus_held if running else 0,
            gpus_max=self.gpus_max,
            gpu_indices=tuple(sorted(self.gpus)),
            gpu_seconds=self.gpu_seconds,
            busy_gpu_seconds=self.busy,
            sm_active_gpu_seconds=self.sm,
            tensor_active_gpu_seconds=self.tensor,
            gpm_gpu_seconds=self.gpm,
            gpu_memory_max_bytes=self.mem_max,
            energy_joules=self.energy,
            cpu_seconds=self.cpu,
            ranks=tuple(sorted(self.ranks)),
            pids=tuple(sorted(self.pids)),
            pid_count=self.pid_count,
            traces=self.traces,
        )


@dataclass(frozen=True, slots=True)
class _Grouping:
    """What a tick's processes say per job, kept while the next tick brings the very same processes (the Observer
    hands over its last tuple again when nothing changed): who holds each GPU and each job's GPUs, memory and CPU."""

    procs: tuple[ProcTick, ...]
    sharers: Mapping[int, int]  # GPU -> how many jobs hold it
    by_job: Mapping[tuple[str, str], tuple[ProcTick, ...]]
    pids: Mapping[tuple[str, str], tuple[int, ...]]
    held: Mapping[tuple[str, str], frozenset[int]]
    cpu: Mapping[tuple[str, str], float]
    holders: Mapping[int, tuple[str, ...]]  # GPU -> the ids of the jobs holding it (sorted)


def _group(procs: tuple[ProcTick, ...]) -> _Grouping:
    holders: dict[int, set[tuple[str, str]]] = {}
    by_job: dict[tuple[str, str], list[ProcTick]] = {}
    for p in procs:
        key = (p.job.job_id, p.job.user)
        by_job.setdefault(key, []).append(p)
        for g in p.gpus:
            holders.setdefault(g, set()).add(key)
    return _Grouping(
        procs=procs,
        sharers={g: len(keys) for g, keys in holders.items()},
        by_job={k: tuple(v) for k, v in by_job.items()},
        pids={k: tuple(p.pid for p in v) for k, v in by_job.items()},
        held={k: frozenset(g for p in v for g in p.gpus) for k, v in by_job.items()},
        cpu={k: sum(p.cpu_seconds for p in v) for k, v in by_job.items()},
        holders={g: tuple(sorted({k[0] for k in keys})) for g, keys in holders.items()},
    )


class JobBook:
    """The running jobs of one host and their totals. The sampling thread observes; any thread may read `records()`
    (immutable values, built when first asked for after a tick, under the lock observe() holds)."""

    def __init__(self, hostname: str, grace_s: float, *, simulated: bool = False) -> None:
        self._hostname = hostname
        self._grace_ms = int(grace_s * 1000)
        self._simulated = simulated
        self._lock = threading.Lock()
        self._live: dict[tuple[str, str], _Acc] = {}
        self._snapshot: tuple[JobRecord, ...] | None = ()  # None: to build from _live on the next read
        self._grouping = _group(())

    def resume(self, records: Iterable[JobRecord]) -> None:
        """Continue stored running records (a restarted dynod) instead of starting second ones."""
        with self._lock:
            for r in records:
                self._live.setdefault(r.key, _Acc(r))
            self._snapshot = None

    def set_record_id(self, key: tuple[str, str], record_id: int) -> None:
        with self._lock:
            acc = self._live.get(key)
            if acc is not None and acc.rec.record_id == 0:
                acc.rec = replace(acc.rec, record_id=record_id)
                self._snapshot = None

    def observe(self, obs: Observation) -> list[JobRecord]:
        """Account one tick; returns the records of the jobs that ended (grace passed without a process seen)."""
        with self._lock:
            self._snapshot = None
            return self._observe(obs)

    def _observe(self, obs: Observation) -> list[JobRecord]:
        same = obs.procs is self._grouping.procs  # the processes of the last tick: their pids and ranks are in
        if not same:
            self._grouping = _group(obs.procs)
        grouping = self._grouping
        memory = obs.gpu_memory
        dt = obs.interval_s
        for key, procs in grouping.by_job.items():
            acc = self._live.get(key)
            if acc is None:
                first = procs[0].job
                acc = self._live[key] = _Acc(
                    JobRecord(
                        job_id=key[0],
                        user=key[1],
                        hostname=self._hostname,
                        first_seen_ms=obs.timestamp_ms,
                        last_seen_ms=obs.timestamp_ms,
                        running=True,
                        source=first.source.value,
                        simulated=self._simulated,
                    )
                )
            acc.last_seen_ms = obs.timestamp_ms
            held = grouping.held[key]
            acc.gpus_held = len(held)
            acc.gpus_max = max(acc.gpus_max, len(held))
            for g in held:
                if len(acc.gpus) < MAX_LISTED:
                    acc.gpus.add(g)
                share = dt / grouping.sharers[g]
                acc.gpu_seconds += share
                gt = obs.gpus.get(g)
                if gt is None:
                    continue
                if gt.utilization_percent is not None:
                    acc.busy += share * gt.utilization_percent / 100.0
                if gt.sm_active_percent is not None:
                    acc.sm += share * gt.sm_active_percent / 100.0
                    acc.gpm += share
                if gt.tensor_active_percent is not None:
                    acc.tensor += share * gt.tensor_active_percent / 100.0
                if gt.power_watts is not None:
                    acc.energy += share * gt.power_watts
            if memory:
                acc.mem_max = max(acc.mem_max, sum(memory.get(pid, 0) for pid in grouping.pids[key]))
            acc.cpu += grouping.cpu[key]
            if same:
                continue
            for p in procs:
                if p.pid not in acc.counted:
                    if len(acc.pids) < MAX_LISTED:
                        acc.pids.add(p.pid)
                    if len(acc.counted) < MAX_COUNTED:
                        acc.counted.add(p.pid)
                    acc.pid_count += 1
                if p.rank is not None and len(acc.ranks) < MAX_LISTED:
                    acc.ranks.add(p.rank)
        for key, n in obs.traces.items():
            acc = self._live.get(key)
            if acc is not None:
                acc.traces += n
        for key, acc in self._live.items():
            if key not in grouping.by_job:
                acc.gpus_held = 0
        ended = [k for k, a in self._live.items() if obs.timestamp_ms - a.last_seen_ms > self._grace_ms]
        return [self._live.pop(k).record(running=False) for k in ended]

    def _records(self) -> tuple[JobRecord, ...]:
        return tuple(a.record(running=True) for a in self._live.values())

    def gpu_holders(self) -> Mapping[int, tuple[str, ...]]:
        """GPU index -> the ids of the jobs whose processes held it at the last tick (sorted; a GPU no job held is
        absent)."""
        return self._grouping.holders  # replaced whole (never changed after): read without the lock

    def records(self) -> tuple[JobRecord, ...]:
        """The running jobs as of the last tick (safe from any thread)."""
        with self._lock:
            if self._snapshot is None:
                self._snapshot = self._records()
            return self._snapshot

    def finish_all(self) -> list[JobRecord]:
        """Every running record as it stands, still running (for the flush at shutdown: a restart resumes them)."""
        with self._lock:
            return list(self._records())
