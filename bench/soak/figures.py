"""What is measured of dynod (RSS, threads, fds, gauges, files on disk) and the table of it."""

from __future__ import annotations

import os
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from soak.dynod import Dynod

__all__ = ["Figures", "measure", "objects_table", "table"]


@dataclass
class Figures:
    at_s: float
    ops: int
    values: dict[str, float] = field(default_factory=dict)


def _proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(rest.split()[0])
    return out


def _gauges(metrics_port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("dyno_") and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in WATCHED_GAUGES:
                out[WATCHED_GAUGES[name]] = float(line.rsplit(" ", 1)[1])
    return out


WATCHED_GAUGES = {
    "dyno_registered_processes": "registered (gauge)",
    "dyno_active_traces": "active traces",
    "dyno_trace_dir_bytes": "trace dir KiB",
}


def measure(d: Dynod, started: float, ops: int) -> Figures:
    f = Figures(time.monotonic() - started, ops)
    st = _proc_status(d.pid)
    f.values["rss KiB"] = st["VmRSS"]
    f.values["threads"] = st["Threads"]
    f.values["open fds"] = len(os.listdir(f"/proc/{d.pid}/fd"))
    try:
        f.values.update(_gauges(d.metrics_port))
    except OSError:
        pass
    if "trace dir KiB" in f.values:
        f.values["trace dir KiB"] //= 1024
    f.values["trace folders"] = sum(1 for p in d.trace_dir.iterdir() if p.is_dir())
    f.values["kineto dir files"] = sum(1 for _ in d.kineto_dir.iterdir())
    f.values["tmp files"] = sum(1 for p in d.trace_dir.rglob("*.tmp"))
    return f


def table(samples: list[Figures], warm: Figures, after: Figures) -> str:
    """`samples` up to the end (8 s after the load stopped); `after`: once the orphaned connections were closed."""
    mid = min(samples, key=lambda f: abs(f.at_s - (warm.at_s + samples[-1].at_s) / 2))
    end = samples[-1]
    names = list(dict.fromkeys(k for f in samples for k in f.values))
    cols = ("start", "warm", "middle", "end", "max", "/1k ops", "/1k 2nd½", "closed")
    lines = [
        f"{'':<20}" + "".join(f"{c:>10}" for c in cols),
        f"{'t (s)':<20}" + "".join(f"{f.at_s:>10.0f}" for f in (samples[0], warm, mid, end)) + f"{'':>30}"
        f"{after.at_s:>10.0f}",
        f"{'operations':<20}" + "".join(f"{f.ops:>10}" for f in (samples[0], warm, mid, end)),
    ]
    for n in names:

        def v(f: Figures, n: str = n) -> float:
            return f.values.get(n, float("nan"))

        per_k = (v(end) - v(warm)) / max(1, end.ops - warm.ops) * 1000
        per_k2 = (v(end) - v(mid)) / max(1, end.ops - mid.ops) * 1000
        peak = max(v(f) for f in samples)
        lines.append(
            f"{n:<20}{v(samples[0]):>10.0f}{v(warm):>10.0f}{v(mid):>10.0f}{v(end):>10.0f}{peak:>10.0f}"
            f"{per_k:>+10.2f}{per_k2:>+10.2f}{v(after):>10.0f}"
        )
    return "\n".join(lines)


def objects_table(warm: Counter[str], end: Counter[str], ops: int) -> str:
    """The types of dynod's objects that grew from warm-up to the end (`--objects`), per 1000 operations."""
    grown = (end - warm).most_common(12)
    lines = [f"dynod's objects by type, warm-up -> end ({sum(end.values())} in all at the end):"]
    for name, n in grown:
        lines.append(f"  {name:<60}{warm[name]:>8} -> {end[name]:>8}  {n * 1000 / ops:+8.2f}/1k ops")
    if not grown:
        lines.append("  no type grew")
    return "\n".join(lines)
