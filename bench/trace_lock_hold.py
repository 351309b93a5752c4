#!/usr/bin/env python3
"""How long one trace request of many processes holds the trace manager's lock, which libkineto's polls take too
(they wait ~90 ms for a reply): StartTrace and CancelTrace of a job of --processes registered processes (half agent,
half libkineto; fake pids, in-process), the longest single hold of each, over --repeats requests. Asserts nothing.

    python bench/trace_lock_hold.py [--processes 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec


class _TimedLock:
    """A lock that remembers its longest hold since `reset()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since = 0.0
        self.longest = 0.0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._since = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        self.longest = max(self.longest, time.perf_counter() - self._since)
        self._lock.release()

    def reset(self) -> None:
        self.longest = 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dyno-lockhold-", dir="/tmp"))
    try:
        reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000, max_per_uid=args.processes)
        for i in range(args.processes):
            protocol = PROTOCOL_KINETO if i % 2 else PROTOCOL_AGENT
            reg.register(RegisteredProcess(pid=200_000 + i, job_id="7", protocol=protocol, rank=i))
        tm = TraceManager(reg, root / "traces", "bench")
        lock = _TimedLock()
        tm.table.lock = lock  # type: ignore[assignment]
        starts, cancels = [], []
        for _ in range(args.repeats):
            lock.reset()
            result = tm.start(TraceSpec(job_id="7", duration_ms=1000))
            starts.append(lock.longest * 1000)
            lock.reset()
            tm.cancel(result.trace_id)
            cancels.append(lock.longest * 1000)
        print(f"{args.processes} processes, {args.repeats} requests each; longest lock hold, ms (min / median / max):")
        for name, ms in (("StartTrace", starts), ("CancelTrace", cancels)):
            s = sorted(ms)
            print(f"  {name:<12} {s[0]:6.1f} / {s[len(s) // 2]:6.1f} / {s[-1]:6.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
