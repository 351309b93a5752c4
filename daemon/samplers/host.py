"""Host sampler: CPU, memory, network, disk, load and uptime, read straight from /proc.

/proc is read directly (no psutil) because it is cheap: six small files per tick, no process iteration, which
keeps the daemon well under 0.2% of a core at 1 s sampling. The root is injectable so unit tests point the
sampler at a fake /proc tree, and the clock is injectable so rates are exact in tests.

What is skipped, and why:
- network: the loopback interface and virtual interfaces whose names start with one of
  `DEFAULT_SKIP_NET_PREFIXES` (container veths, bridges, tunnels, overlay networks). They only mirror traffic
  that also crosses a physical NIC (or never leaves the host) and on container hosts there can be hundreds.
  InfiniBand (ib*), bonds and VLANs are kept.
- disk: loop, ram, zram, optical (sr) and floppy (fd) devices, and partitions of a listed whole disk (sda1 of
  sda, nvme0n1p1 of nvme0n1) because their traffic is already counted on the disk. Device-mapper (dm-*) and
  md RAID devices are kept: they are what the user mounts.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.samplers.base import Reading, SamplerState, labels
from dyno.daemon.samplers.counters import CounterDeltas

__all__ = ["HostSampler", "DEFAULT_SKIP_NET_PREFIXES", "DEFAULT_SKIP_DISK_PREFIXES"]

log = logging.getLogger(__name__)

DEFAULT_SKIP_NET_PREFIXES: tuple[str, ...] = (
    "lo",
    "veth",
    "docker",
    "br-",
    "virbr",
    "cni",
    "flannel",
    "cali",
    "vxlan",
    "tunl",
    "kube-",
    "weave",
    "lxc",
    "ifb",
    "dummy",
)
DEFAULT_SKIP_DISK_PREFIXES: tuple[str, ...] = ("loop", "ram", "zram", "sr", "fd")

SECTOR_BYTES = 512  # /proc/diskstats always counts 512-byte sectors, whatever the device's block size
_KIB = 1024

# /proc/stat cpu line fields: user nice system idle iowait irq softirq steal (guest and guest_nice are already
# included in user and nice, so they are not added to the total).
_CPU_FIELDS = 8
CPU_MODES: tuple[str, ...] = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_NET_TOTALS = (
    "net_rx_bytes",
    "net_rx_packets",
    "net_rx_errors",
    "net_rx_drops",
    "net_tx_bytes",
    "net_tx_packets",
    "net_tx_errors",
    "net_tx_drops",
)


@dataclass(frozen=True, slots=True)
class _Totals:
    """The raw cumulative counters of one tick, kept as read: turned into readings only when asked for (a scrape),
    so an unscraped daemon pays nothing for them."""

    cpu: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (cpu index, jiffies per CPU_MODES), per CPU, no "total"
    net: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (interface, values per _NET_TOTALS)
    disk: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (device, (sectors read, written, reads, writes, io ms))


class _ProcFile:
    """A /proc file kept open and re-read from offset 0 each tick: procfs regenerates the content on a read at
    offset 0, and skipping open/close keeps a 1 s sampler cheap. Reopened after any error."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def read(self) -> str | None:
        for _attempt in (1, 2):  # a stale descriptor gets one reopen
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                chunks = []
                offset = 0
                while chunk := os.pread(self._fd, 65536, offset):
                    chunks.append(chunk)
                    offset += len(chunk)
                return b"".join(chunks).decode("utf-8", "replace")
            except OSError as exc:
                self.close()
                last = exc
        log.debug("cannot read %s: %s", self.path, last)
        return None

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


class HostSampler:
    """Sampler protocol implementation for the host. The first `sample()` primes the counters: it returns the
    gauges (memory, load, uptime) but no CPU percentages or rates."""

    name = "host"

    def __init__(
        self,
        proc_root: str | os.PathLike[str] = "/proc",
        clock: Callable[[], float] = time.monotonic,
        skip_net_prefixes: Iterable[str] = DEFAULT_SKIP_NET_PREFIXES,
        skip_disk_prefixes: Iterable[str] = DEFAULT_SKIP_DISK_PREFIXES,
    ) -> None:
        self._root = Path(proc_root)
        self._clock = clock
        self._skip_net = tuple(skip_net_prefixes)
        self._skip_disk = tuple(skip_disk_prefixes)
        self._cpu = CounterDeltas()
        self._net = CounterDeltas()
        self._disk = CounterDeltas()
        self._last_t: float | None = None
        self._totals = _Totals()
        self._jiffy_s = 1.0 / _clock_ticks()
        self._ok = (self._root / "stat").exists()
        self._files = {
            name: _ProcFile(self._root / name)
            for name in ("stat", "meminfo", "net/dev", "diskstats", "loadavg", "uptime")
        }

    def state(self) -> SamplerState:
        if self._ok:
            return SamplerState(name=self.name, ok=True, backend="procfs")
        return SamplerState(name=self.name, ok=False, backend="procfs", reason=f"{self._root}/stat not readable")

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def sample(self) -> list[Reading]:
        now = self._clock()
        dt = None if self._last_t is None else now - self._last_t
        self._last_t = now
        out: list[Reading] = []
        # Each source is independent: one unreadable file drops its values, never the others.
        cpu = self._sample_cpu(out)
        self._sample_memory(out)
        net = self._sample_net(out, dt)
        disk = self._sample_disk(out, dt)
        self._sample_load(out)
        self._sample_uptime(out)
        self._totals = _Totals(cpu, net, disk)  # one assignment: a scrape on another thread sees one tick's values
        return out

    def totals(self) -> list[Reading]:
        """The cumulative counters the last sample() read, in base units (seconds, bytes, operations): what a
        Prometheus counter exports. CPU time is per CPU and mode only (no total, so sum() adds up)."""
        t = self._totals
        out: list[Reading] = []
        for cpu, jiffies in t.cpu:
            out.extend(
                Reading("cpu_seconds", j * self._jiffy_s, labels(cpu=cpu, mode=m))
                for m, j in zip(CPU_MODES, jiffies, strict=True)
            )
        for device, values in t.net:
            lab = labels(device=device)
            out.extend(Reading(n, float(v), lab) for n, v in zip(_NET_TOTALS, values, strict=True))
        for device, (rsect, wsect, reads, writes, io_ms) in t.disk:
            lab = labels(device=device)
            out.append(Reading("disk_read_bytes", float(rsect * SECTOR_BYTES), lab))
            out.append(Reading("disk_written_bytes", float(wsect * SECTOR_BYTES), lab))
            out.append(Reading("disk_reads_completed", float(reads), lab))
            out.append(Reading("disk_writes_completed", float(writes), lab))
            out.append(Reading("disk_io_time_seconds", io_ms / 1000.0, lab))
        return out

    # -- CPU ---------------------------------------------------------------------------------------------

    def _sample_cpu(self, out: list[Reading]) -> tuple[tuple[str, tuple[int, ...]], ...]:
        text = self._files["stat"].read()
        if text is None:
            return ()
        totals: list[tuple[str, tuple[int, ...]]] = []
        for line in text.splitlines():
            if not line.startswith("cpu"):
                continue
            parts = line.split()
            cpu = "total" if parts[0] == "cpu" else parts[0][3:]
            try:
                counters = [int(x) for x in parts[1 : 1 + _CPU_FIELDS]]
            except ValueError:
                continue
            counters += [0] * (_CPU_FIELDS - len(counters))  # old kernels lack steal
            if cpu != "total":
                totals.append((cpu, tuple(counters)))
            deltas = self._cpu.update(cpu, counters)
            if deltas is None:
                continue
            total = sum(deltas)
            if total <= 0:
                continue  # no tick elapsed for this CPU (sampled twice within one jiffy)
            user, nice, system, idle, iowait, irq, softirq, _steal = deltas
            lab = labels(cpu=cpu)
            scale = 100.0 / total
            out.append(Reading("cpu_user_percent", (user + nice) * scale, lab))
            out.append(Reading("cpu_system_percent", (system + irq + softirq) * scale, lab))
            out.append(Reading("cpu_iowait_percent", iowait * scale, lab))
            out.append(Reading("cpu_idle_percent", idle * scale, lab))
        self._cpu.end_round()
        return tuple(totals)

    # -- memory ------------------------------------------------------------------------------------------

    def _sample_memory(self, out: list[Reading]) -> None:
        text = self._files["meminfo"].read()
        if text is None:
            return
        info: dict[str, int] = {}
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields and key in ("MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached"):
                info[key] = int(fields[0]) * _KIB
        total = info.get("MemTotal")
        if not total:
            return
        available = info.get("MemAvailable")
        if available is None:  # kernels before 3.14
            available = info.get("MemFree", 0) + info.get("Buffers", 0) + info.get("Cached", 0)
        # "used" as procps' free(1) reports it today: what is not available to new allocations.
        used = total - available
        out.append(Reading("memory_total_bytes", float(total)))
        out.append(Reading("memory_used_bytes", float(used)))
        out.append(Reading("memory_available_bytes", float(available)))
        out.append(Reading("memory_used_percent", 100.0 * used / total))

    # -- network -----------------------------------------------------------------------------------------

    def _sample_net(self, out: list[Reading], dt: float | None) -> tuple[tuple[str, tuple[int, ...]], ...]:
        text = self._files["net/dev"].read()
        if text is None:
            return ()
        totals: list[tuple[str, tuple[int, ...]]] = []
        for line in text.splitlines()[2:]:
            name, sep, rest = line.partition(":")
            name = name.strip()
            if not sep or name.startswith(self._skip_net):
                continue
            f = rest.split()
            if len(f) < 16:
                continue
            # rx: bytes packets errs drop fifo frame compressed multicast | tx: bytes packets errs drop ...
            rx_b, rx_p, rx_e, rx_d, tx_b, tx_p, tx_e, tx_d = (int(f[i]) for i in (0, 1, 2, 3, 8, 9, 10, 11))
            totals.append((name, (rx_b, rx_p, rx_e, rx_d, tx_b, tx_p, tx_e, tx_d)))
            deltas = self._net.update(name, (rx_b, tx_b, rx_p, tx_p, rx_e + tx_e, rx_d + tx_d))
            if deltas is None or not dt or dt <= 0:
                continue
            lab = labels(device=name)
            names = (
                "net_rx_bytes_per_second",
                "net_tx_bytes_per_second",
                "net_rx_packets_per_second",
                "net_tx_packets_per_second",
                "net_errors_per_second",
                "net_drops_per_second",
            )
            out.extend(Reading(n, d / dt, lab) for n, d in zip(names, deltas, strict=True))
        self._net.end_round()
        return tuple(totals)

    # -- disk --------------------------------------------------------------------------------------------

    def _sample_disk(self, out: list[Reading], dt: float | None) -> tuple[tuple[str, tuple[int, ...]], ...]:
        text = self._files["diskstats"].read()
        if text is None:
            return ()
        totals: list[tuple[str, tuple[int, ...]]] = []
        rows: dict[str, list[str]] = {}
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 14 and not f[2].startswith(self._skip_disk):
                rows[f[2]] = f
        for name, f in rows.items():
            if _is_partition(name, rows):
                continue
            # major minor name | reads merged sectors ms | writes merged sectors ms | in_flight io_ms weighted_ms
            reads, rsect, writes, wsect, io_ms = (int(f[i]) for i in (3, 5, 7, 9, 12))
            totals.append((name, (rsect, wsect, reads, writes, io_ms)))
            deltas = self._disk.update(name, (rsect, wsect, reads, writes, io_ms))
            if deltas is None or not dt or dt <= 0:
                continue
            d_rsect, d_wsect, d_reads, d_writes, d_io_ms = deltas
            lab = labels(device=name)
            out.append(Reading("disk_read_bytes_per_second", d_rsect * SECTOR_BYTES / dt, lab))
            out.append(Reading("disk_write_bytes_per_second", d_wsect * SECTOR_BYTES / dt, lab))
            out.append(Reading("disk_reads_per_second", d_reads / dt, lab))
            out.append(Reading("disk_writes_per_second", d_writes / dt, lab))
            # time with at least one I/O in flight, as iostat's %util
            out.append(Reading("disk_busy_percent", min(100.0, d_io_ms / (dt * 1000.0) * 100.0), lab))
        self._disk.end_round()
        return tuple(totals)

    # -- load and uptime ---------------------------------------------------------------------------------

    def _sample_load(self, out: list[Reading]) -> None:
        text = self._files["loadavg"].read()
        if text is None:
            return
        f = text.split()
        if len(f) >= 3:
            for name, value in zip(("load_average_1m", "load_average_5m", "load_average_15m"), f[:3], strict=True):
                out.append(Reading(name, float(value)))

    def _sample_uptime(self, out: list[Reading]) -> None:
        text = self._files["uptime"].read()
        if text:
            out.append(Reading("host_uptime_seconds", float(text.split()[0])))


def _clock_ticks() -> int:
    """USER_HZ, the unit of /proc/stat's CPU times (100 on every Linux architecture in practice)."""
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


_PARTITION = re.compile(r"(.+?)(p?)(\d+)")


def _is_partition(name: str, devices: dict[str, list[str]]) -> bool:
    """sda1 is a partition of sda; nvme0n1p1 of nvme0n1, mmcblk0p1 of mmcblk0 (disks ending in a digit put a 'p'
    before the partition number, which keeps nvme0n10 from looking like a partition of nvme0n1)."""
    m = _PARTITION.fullmatch(name)
    if m is None:
        return False
    base, p = m.group(1), m.group(2)
    return base in devices and base[-1].isdigit() == bool(p)
