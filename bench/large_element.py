"""Benchmark: the trace loader on one very large JSON element (prints a table; not a test).

A trace whose ``traceEvents`` holds ordinary events plus one event with a single string of N MB in its args (what a
hostile or broken writer can plant; gzip makes it a few KB on disk). Each size is loaded once in a fresh process
(``load_trace``, imports excluded from the time); the table gives the wall time, the worker's peak RSS and the
outcome (events loaded, or the start of the load error). ``--where meta`` puts the string in the metadata outside
the events array instead; ``--where arrays`` writes N MB of small arrays (``"a0": [], ...``) in the metadata before
the events array.

    python bench/large_element.py [--sizes 8 16 32 64 128] [--where event|meta] [--timeout 120]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":%d,"dur":5,"args":{}}'


def _write(path: Path, mb: int, where: str) -> None:
    """A gzip trace of 1,000 small events and one string of ``mb`` MiB (in an event's args, or in the metadata), or
    ``mb`` MiB of small arrays in the metadata."""
    chunk = b"a" * (1 << 20)  # (written in chunks: the parent's peak RSS would show in the forked worker's)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        if where == "arrays":
            fh.write(b"{")
            for i in range(mb):
                fh.write(b"".join(b'"a%07d":[],' % j for j in range(i * 74898, (i + 1) * 74898)))  # 14 B each
        fh.write(b'{"traceEvents":[' if where != "arrays" else b'"traceEvents":[')
        fh.write(b",".join(_EVENT % (10 * i) for i in range(1000)))
        if where == "arrays":
            fh.write(b"]}")
        elif where == "event":
            fh.write(b',{"ph":"X","cat":"cpu_op","name":"big","pid":1,"tid":1,"ts":1,"dur":1,"args":{"s":"')
            for _ in range(mb):
                fh.write(chunk)
            fh.write(b'"}}],"displayTimeUnit":"ms"}')
        else:
            fh.write(b'],"note":"')
            for _ in range(mb):
                fh.write(chunk)
            fh.write(b'"}')


def _worker(path: str) -> dict[str, object]:
    from dyno.trace_analysis.loader import TraceLoadError, load_trace

    t0 = time.perf_counter()
    try:
        outcome = f"{len(load_trace(path).events)} events"
    except TraceLoadError as e:
        outcome = "error: " + e.reason[:70]
    return {"s": time.perf_counter() - t0, "outcome": outcome}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128], help="string sizes, MiB")
    ap.add_argument("--where", choices=("event", "meta", "arrays"), default="event")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per load before it is stopped")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker)))
        return 0
    print(f"{'MiB':>10s} {'gzip KB':>8s} {'load s':>8s} {'peak RSS MB':>12s}  outcome")
    with tempfile.TemporaryDirectory(prefix="dyno-large-element-") as tmp:
        for mb in args.sizes:
            path = Path(tmp) / f"big-{mb}.json.gz"
            _write(path, mb, args.where)
            proc = subprocess.Popen([sys.executable, __file__, "--worker", str(path)], stdout=subprocess.PIPE)
            t0 = time.monotonic()
            timer = threading.Timer(args.timeout, proc.kill)
            timer.start()
            out = proc.stdout.read() if proc.stdout else b""
            _, _, usage = os.wait4(proc.pid, 0)  # (the worker's own peak RSS, not the largest child's so far)
            timer.cancel()
            rss = usage.ru_maxrss / 1024
            res = json.loads(out) if out else {"s": time.monotonic() - t0, "outcome": f"stopped after {args.timeout} s"}
            kb = path.stat().st_size / 1024
            print(f"{mb:10d} {kb:8.0f} {res['s']:8.2f} {rss:12.0f}  {res['outcome']}", flush=True)
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
