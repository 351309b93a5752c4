"""Benchmark: the trace loader's time per file, in fresh processes and warm (prints a table; not a test).

What the small traces pay is mostly fixed cost (set-up per file, per batch, per column; first calls in a fresh
process), which ``bench/analysis_vs_hta.py`` rounds to the millisecond. For each trace folder this runs
``load_traces(folder)`` once in each of ``--repeat`` fresh processes (imports excluded from the timing), then
``--warm`` more times in the last of them, and prints the best and median fresh time and the best warm time.

    python bench/load_fixed_cost.py [--traces DIR] [--repeat 9] [--warm 20] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACES = next(
    (
        p
        for p in (REPO.parent / "shared" / "traces" / "gpu", REPO.parent.parent / "shared" / "traces" / "gpu")
        if p.is_dir()
    ),
    REPO.parent / "shared" / "traces" / "gpu",
)
DEFAULT_NAMES = ["simple_add", "alexnet", "trace_filter", "nccl_parser_config", "ns_resolution_trace"]
DEFAULT_NAMES.append("negative_queue_length_values_check")


def _worker(folder: str, warm: int) -> dict[str, float]:
    from dyno.trace_analysis.loader import load_traces

    t0 = time.perf_counter()
    load_traces(folder)
    fresh = time.perf_counter() - t0
    times = []
    for _ in range(warm):
        t0 = time.perf_counter()
        load_traces(folder)
        times.append(time.perf_counter() - t0)
    return {"fresh": fresh, "warm": min(times) if times else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES, help="folder of trace folders")
    ap.add_argument("--repeat", type=int, default=9, help="fresh processes per trace")
    ap.add_argument("--warm", type=int, default=20, help="warm loads in the last process")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("names", nargs="*", help="trace folders (default: the six shared traces)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], int(args.worker[1]))))
        return 0
    print(f"{'trace':38s} {'fresh best ms':>14s} {'fresh median':>13s} {'warm best ms':>13s}")
    for name in args.names or DEFAULT_NAMES:
        folder = args.traces / name
        if not folder.is_dir():
            print(f"{name:38s} (no such folder)")
            continue
        runs = []
        for i in range(args.repeat):
            warm = args.warm if i == args.repeat - 1 else 0
            cmd = [sys.executable, __file__, "--worker", str(folder), str(warm)]
            runs.append(json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
        fresh = [r["fresh"] * 1e3 for r in runs]
        print(f"{name:38s} {min(fresh):14.2f} {statistics.median(fresh):13.2f} {runs[-1]['warm'] * 1e3:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
