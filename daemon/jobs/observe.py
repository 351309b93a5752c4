"""Builds a tick's Observation for the JobBook: GPU values from the sample, GPU holders from NVML's process lists
(or, with simulated GPUs, from the registered trainers' placement), jobs from attribution, CPU from /proc."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dyno.daemon.history import Sample
from dyno.daemon.jobs.attribution import Attributor, ProcReader
from dyno.daemon.jobs.records import GpuTick, Observation, ProcTick
from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuProcess

__all__ = ["Trainer", "SimPlacement", "Observer", "gpu_ticks"]

_MEMORY = "memory"  # not a GpuTick field: the memory the GPU's processes hold (shared out by simulated placement)
_GPU_FIELDS = {
    gm.UTILIZATION: "utilization_percent",
    gm.SM_ACTIVE: "sm_active_percent",
    gm.TENSOR_ACTIVE: "tensor_active_percent",
    gm.POWER: "power_watts",
    gm.MEMORY_USED: _MEMORY,
}
_MAX_INTERVALS = 3.0  # a tick after a stall or a suspend accounts at most this many intervals
# A trainer's children are listed again at most this often (half of the opens of a tick otherwise); a DataLoader
# worker lives for an epoch or the whole run, and its CPU is counted from the tick it is first seen
CHILDREN_EVERY_S = 10.0
# Processes' CPU times are read this often (one /proc open per process: most of a tick's cost); their totals are the
# same, only the simulated GPUs' load follows the trainers' CPU share at this pace
CPU_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class Trainer:
    """A registered trainer as accounting sees it."""

    pid: int
    job_id: str
    uid: int
    rank: int | None = None
    local_rank: int | None = None


def trainers(records: Sequence[RegisteredProcess]) -> list[Trainer]:
    """The registry's trainers (torch launchers left out: they only wait for their workers)."""
    return [Trainer(r.pid, r.job_id, r.uid, r.rank, r.local_rank) for r in records if not r.launcher]


def gpu_ticks(sample: Sample) -> tuple[dict[int, GpuTick], dict[int, float]]:
    """Each GPU's values at the sample, and each GPU's used memory (bytes), in one pass over its readings."""
    values: dict[int, dict[str, float]] = {}
    memory: dict[int, float] = {}
    for r in sample.readings:
        field = _GPU_FIELDS.get(r.name)
        if field is None:
            continue
        gpu = _gpu_index(r.labels)
        if gpu is None:
            continue
        if field == _MEMORY:
            memory[gpu] = r.value
        else:
            values.setdefault(gpu, {})[field] = r.value
    return {i: GpuTick(i, **v) for i, v in values.items()}, memory  # type: ignore[arg-type]


_GPU_OF: dict[tuple[tuple[str, str], ...], int | None] = {}  # a reading's labels -> its GPU index (the same each tick)


def _gpu_index(labels: tuple[tuple[str, str], ...]) -> int | None:
    try:
        return _GPU_OF[labels]
    except KeyError:
        pass
    gpu = dict(labels).get("gpu")
    if len(_GPU_OF) >= 4096:  # bounded, whatever labels come and go
        _GPU_OF.clear()
    index = _GPU_OF[labels] = int(gpu) if gpu is not None and gpu.isdigit() else None
    return index


class SimPlacement:
    """Simulated GPUs hold the registered trainers: each on the GPU of its LOCAL_RANK, else the next one round-robin
    (kept for the process's life). Their pids are real processes; only the GPU is simulated."""

    def __init__(self, n_gpus: int) -> None:
        self._n = n_gpus
        self._placed: dict[int, int] = {}
        self._next = 0
        self.version = 0  # changes whenever a trainer is placed or leaves

    def place(self, trainers: Sequence[Trainer]) -> dict[int, int]:
        """pid -> simulated GPU index for every trainer."""
        live = {t.pid for t in trainers}
        for pid in [p for p in self._placed if p not in live]:
            del self._placed[pid]
            self.version += 1
        for t in trainers:
            if t.pid in self._placed:
                continue
            self.version += 1
            if t.local_rank is not None and t.local_rank >= 0:
                self._placed[t.pid] = t.local_rank % self._n
            else:
                self._placed[t.pid] = self._next % self._n
                self._next += 1
        return dict(self._placed)

    def current(self) -> dict[int, int]:
        return dict(self._placed)


class Observer:
    """Turns a sample into an Observation. Keeps each pid's last CPU time (to account deltas) and the last tick's
    time; runs on the sampling thread only."""

    def __init__(
        self,
        attributor: Attributor,
        proc: ProcReader,
        interval_s: float,
        gpu_processes: Callable[[], list[GpuProcess]],
        placement: SimPlacement | None = None,
        cpu_every_s: float = CPU_EVERY_S,
    ) -> None:
        self._attributor = attributor
        self._cpu_every_s = cpu_every_s
        self._cpu_at_ms: int | None = None  # sample time of the last CPU reading
        self._proc = proc
        self._interval_s = interval_s
        self._gpu_processes = gpu_processes
        self._placement = placement
        self._cpu: dict[int, tuple[int, float]] = {}  # pid -> (start time, CPU seconds at the last tick)
        self._last_ms: int | None = None
        self.trainer_cpu_share: dict[int, float] = {}  # pid -> its own CPU busy share over the last tick (0-1+)
        self._kids: dict[int, list[int]] = {}  # trainer pid -> its children when last listed
        self._kids_at: float | None = None  # sample time (s) of that listing
        self._now_s = 0.0
        # the last tick's processes without CPU time, and what they were built from: handed over again while
        # nothing changes between CPU readings (the JobBook then reuses its grouping of them too)
        self._steady: tuple[tuple[object, ...], tuple[ProcTick, ...]] | None = None
        self._loads: tuple[tuple[int, int | None], dict[int, float]] | None = None  # sim_loads(), and its inputs

    def _children(self, registered: Sequence[Trainer]) -> set[int]:
        """The trainers' children, listed again every CHILDREN_EVERY_S and for each trainer not listed yet."""
        relist = self._kids_at is None or self._now_s - self._kids_at >= CHILDREN_EVERY_S
        if relist:
            self._kids_at = self._now_s
        kids: dict[int, list[int]] = {}
        for t in registered:
            known = self._kids.get(t.pid)
            kids[t.pid] = self._proc.children(t.pid) if relist or known is None else known
        self._kids = kids
        return {pid for listed in kids.values() for pid in listed}

    def observe(
        self, sample: Sample, registered: Sequence[Trainer], traces: Sequence[tuple[int, ...]] = ()
    ) -> Observation:
        """`traces`: the pids of each trace started since the last tick (one trace counts once per job)."""
        now = sample.timestamp_ms
        self._now_s = now / 1000.0
        if self._last_ms is None or now <= self._last_ms:
            dt = self._interval_s
        else:
            dt = min((now - self._last_ms) / 1000.0, _MAX_INTERVALS * self._interval_s)
        self._last_ms = now
        gpus, used = gpu_ticks(sample)
        holders, memory = self._holders(used, registered)
        kids = self._children(registered)
        read_cpu = self._cpu_at_ms is None or now - self._cpu_at_ms >= self._cpu_every_s * 1000 or now < self._cpu_at_ms
        inputs = (list(registered), holders, kids)
        if not read_cpu and self._steady is not None and self._steady[0] == inputs:
            procs = self._steady[1]
        else:
            procs = self._procs(now, read_cpu, registered, holders, kids)
            self._steady = None if read_cpu else (inputs, procs)
        return Observation(now, dt, gpus, procs, _job_traces(procs, traces) if traces else {}, memory)

    def _holders(
        self, used: dict[int, float], registered: Sequence[Trainer]
    ) -> tuple[dict[int, tuple[int, ...]], dict[int, int]]:
        """pid -> the GPUs it holds (sorted), and pid -> the GPU memory it holds (bytes): from NVML's process lists,
        or with simulated GPUs from the trainers' placement (`used`: each GPU's memory, shared by its trainers)."""
        if self._placement is not None:
            placed = self._placement.place(registered)
            per_gpu: dict[int, int] = {}
            for g in placed.values():
                per_gpu[g] = per_gpu.get(g, 0) + 1
            return (
                {pid: (g,) for pid, g in placed.items()},
                {pid: int(used.get(g, 0.0) / per_gpu[g]) for pid, g in placed.items()},
            )
        held: dict[int, set[int]] = {}
        memory: dict[int, int] = {}
        for gp in self._gpu_processes():
            held.setdefault(gp.pid, set()).add(gp.gpu_index)
            memory[gp.pid] = memory.get(gp.pid, 0) + gp.used_memory_bytes
        return {pid: tuple(sorted(gpus)) for pid, gpus in held.items()}, memory

    def _procs(
        self,
        now: int,
        read_cpu: bool,
        registered: Sequence[Trainer],
        holders: dict[int, tuple[int, ...]],
        kids: set[int],
    ) -> tuple[ProcTick, ...]:
        """Every process of the tick (the holders of GPUs, the trainers and their children) with its job; with their
        CPU time since the last reading when `read_cpu`."""
        by_pid = {t.pid: t for t in registered}
        reg = {t.pid: (t.job_id, t.uid) for t in registered}
        pids = set(holders) | set(reg)
        pids.update(kids)
        since_s = (now - self._cpu_at_ms) / 1000.0 if self._cpu_at_ms is not None else 0.0
        procs: list[ProcTick] = []
        cpu_seen: dict[int, tuple[int, float]] = {}
        share: dict[int, float] = {}
        for pid in sorted(pids):
            used = 0.0
            stat: tuple[int, int, float] | None = None
            if read_cpu:
                stat = self._proc.stat(pid)
                if stat is None:  # gone since it was listed
                    continue
                _ppid, start, cpu = stat
                before = self._cpu.get(pid)
                known = before is not None and before[0] == start
                used = max(0.0, cpu - before[1]) if before is not None and known else 0.0
                cpu_seen[pid] = (start, cpu)
                if pid in reg and known and since_s > 0:  # a first sighting has no share yet: its GPU keeps the wave
                    share[pid] = used / since_s
            trainer = by_pid.get(pid)
            procs.append(
                ProcTick(
                    pid=pid,
                    job=self._attributor.resolve(pid, reg, stat),
                    gpus=holders.get(pid, ()),
                    cpu_seconds=used,
                    rank=trainer.rank if trainer is not None else None,
                )
            )
        if read_cpu:
            self._cpu_at_ms = now
            self._cpu = cpu_seen
            self.trainer_cpu_share = share
            self._attributor.forget(set(cpu_seen))
        return tuple(procs)

    def sim_loads(self) -> dict[int, float]:
        """Each simulated GPU's load for the next sample: the CPU busy share of the trainers it holds (their mean),
        so a trainer starved by a slow DataLoader shows as a poorly used GPU. The same dict while neither the
        placement nor the CPU shares changed (not to be modified)."""
        if self._placement is None:
            return {}
        inputs = (self._placement.version, self._cpu_at_ms)
        if self._loads is not None and self._loads[0] == inputs:
            return self._loads[1]
        placed = self._placement.current()
        loads: dict[int, list[float]] = {}
        for pid, g in placed.items():
            if pid in self.trainer_cpu_share:
                loads.setdefault(g, []).append(min(1.0, self.trainer_cpu_share[pid]))
        means = {g: sum(v) / len(v) for g, v in loads.items()}
        self._loads = (inputs, means)
        return means


def _job_traces(procs: Sequence[ProcTick], traces: Sequence[tuple[int, ...]]) -> dict[tuple[str, str], int]:
    """Traces started since the last tick per job: a trace of several processes of a job counts once for it."""
    job_traces: dict[tuple[str, str], int] = {}
    keys = {p.pid: (p.job.job_id, p.job.user) for p in procs}
    for traced in traces:
        for key in {keys[pid] for pid in traced if pid in keys}:
            job_traces[key] = job_traces.get(key, 0) + 1
    return job_traces
