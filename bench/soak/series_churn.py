"""The history's series table on a node whose network interfaces come and go (in-process)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

__all__ = ["series_churn"]


def series_churn(hours: float, pods_at_once: int = 4, pod_life_s: int = 600) -> None:
    """dynod's host sampler and history over `hours` of 1 s ticks (simulated clock, fake /proc) on a node whose
    pods each get a host-side interface of a new name (AWS VPC CNI's `eni<hash>`, GKE's `gke<hash>`: not among
    the virtual prefixes the sampler skips). Prints the history's series table and the memory it and the GetMetrics
    encoder hold, every simulated hour. The history keeps 1 h of samples: a series older than that is in none."""
    import tracemalloc

    from dyno.daemon.history import History, Sample
    from dyno.daemon.samplers.host import HostSampler
    from dyno.daemon.wire import StoredEncoder

    root = Path(tempfile.mkdtemp(prefix="dyno-churn-"))
    (root / "net").mkdir()
    (root / "stat").write_text("cpu  1 0 1 100 0 0 0 0 0 0\ncpu0 1 0 1 100 0 0 0 0 0 0\n")
    (root / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
    (root / "diskstats").write_text("")
    (root / "loadavg").write_text("0.1 0.1 0.1 1/100 1\n")
    (root / "uptime").write_text("100.0 100.0\n")
    head = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes ...\n"
    now = [0.0]
    sampler = HostSampler(root, clock=lambda: now[0])
    history = History(3600, clock=lambda: now[0])
    encoder = StoredEncoder(history.series)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    print(f"series churn: {pods_at_once} pods at once, each {pod_life_s} s with a new interface name, 1 s ticks")
    print(f"{'hours':>6}{'pods':>8}{'series':>9}{'in ring':>9}{'KiB held':>10}")
    pod_every = pod_life_s // pods_at_once
    for t in range(int(hours * 3600) + 1):
        now[0] = float(t)
        first = max(0, t // pod_every - pods_at_once + 1)
        names = ["eth0"] + [f"eni{uuid.UUID(int=i).hex[-11:]}" for i in range(first, t // pod_every + 1)]
        rows = "".join(f"{n}: {t * 1000} {t} 0 0 0 0 0 0 {t * 900} {t} 0 0 0 0 0 0\n" for n in names)
        (root / "net" / "dev").write_text(head + rows)
        history.append(Sample(t * 1000, tuple(sampler.sample())))
        if t % 600 == 0:
            encoder.response_bytes(history.stored(limit=60), "h")  # a GetMetrics now and then
        if t % 3600 == 0:
            live = len({i for st in history.stored() for i in st.ids})
            held = (tracemalloc.get_traced_memory()[0] - base) // 1024
            print(f"{t / 3600:>6.0f}{t // pod_every:>8}{len(history.series):>9}{live:>9}{held:>10}")
    tracemalloc.stop()
    shutil.rmtree(root, ignore_errors=True)
