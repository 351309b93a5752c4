"""The memory limits of dynod's own cgroup (systemd's MemoryHigh= / MemoryMax=), read once at start so that a
history budget that cannot fit under them is named at start instead of an OOM kill hours later, when the history
has filled (and Restart=on-failure then loses it and starts filling it again)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASELINE_BYTES", "MemoryLimits", "history_memory_problem", "memory_limits"]

# dynod's own resident memory besides the history: ~55 MB measured with 8 simulated GPUs (docs/BENCHMARKS.md)
BASELINE_BYTES = 64 * 2**20
_UNLIMITED_V1 = 2**62  # cgroup v1 reports "no limit" as a page-rounded LONG_MAX


@dataclass(frozen=True)
class MemoryLimits:
    high: int | None  # throttling starts here (cgroup v2 memory.high; systemd MemoryHigh=); None: none
    max: int | None  # the OOM killer acts here (memory.max / v1 memory.limit_in_bytes; systemd MemoryMax=)
    cgroup: str  # the cgroup path, for the message


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit():  # "max" (v2): no limit
        return None
    value = int(text)
    return value if value < _UNLIMITED_V1 else None


def memory_limits(proc_self: Path = Path("/proc/self"), cgroup_root: Path = Path("/sys/fs/cgroup")) -> MemoryLimits:
    """This process's cgroup memory limits (v2, else the v1 memory controller); none where unreadable."""
    try:
        lines = (proc_self / "cgroup").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return MemoryLimits(None, None, "")
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        rel = path.lstrip("/")
        if hierarchy == "0" and controllers == "" and (cgroup_root / rel / "memory.max").exists():
            d = cgroup_root / rel
            return MemoryLimits(_read_limit(d / "memory.high"), _read_limit(d / "memory.max"), path)
        if "memory" in controllers.split(","):
            limit = _read_limit(cgroup_root / "memory" / rel / "memory.limit_in_bytes")
            if limit is not None:
                return MemoryLimits(None, limit, path)
    return MemoryLimits(None, None, "")


def history_memory_problem(history_bytes: int, limits: MemoryLimits) -> str | None:
    """Why a history of `history_bytes` (when full) cannot fit under the cgroup's limits with dynod's baseline;
    None when it fits or there is no limit."""
    need = history_bytes + BASELINE_BYTES
    for name, limit, effect in (
        ("MemoryHigh", limits.high, "the kernel throttles and reclaims dynod from there on"),
        ("MemoryMax", limits.max, "the kernel kills dynod there (OOM)"),
    ):
        if limit is not None and need > limit:
            return (
                f"the history will take ~{history_bytes / 2**20:.0f} MiB when full, ~{need / 2**20:.0f} MiB with "
                f"dynod's own memory, more than this service's {name} of {limit / 2**20:.0f} MiB (cgroup "
                f"{limits.cgroup}): {effect}; lower history_max_bytes or history_s, or raise MemoryHigh= and "
                "MemoryMax= in a drop-in (systemctl edit dynod)"
            )
    return None
