"""Where dyno's analysis time goes on one trace: load / each analysis / each rule / report summaries (not a test).

Every run is a fresh process (as in bench/analysis_vs_hta.py, whose dyno worker this mirrors: load, the nine
analyses and rank_spread, then ``analyze_traces`` with every rule and the report summaries); each figure is the
best over the runs, in ms. Small traces are dominated by fixed per-call and first-call costs: this is the tool
to see which analysis or rule carries them.

    python bench/analysis_split.py PATH [PATH...] [--runs 7] [--warm 5]

``--warm N`` adds N passes in the same process (each on a freshly loaded trace: caches per trace start empty) and
one more after a 64 MiB write: what a fresh process pays beyond warm work, and how much of it is cold CPU caches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

_ANALYSES = (
    "temporal_breakdown",
    "idle_time_breakdown",
    "kernel_breakdown",
    "comm_comp_overlap",
    "launch_stats",
    "queue_length",
    "memory_copies",
    "step_timings",
    "cpu_op_summary",
)


def _worker(path: str, warm: int) -> list[dict[str, float]]:
    """The split of one fresh pass, then of ``warm`` passes in the same process (each on a freshly loaded trace),
    then of one pass after a 64 MiB write has evicted the CPU caches (numpy and interpreter state stay warm)."""
    import numpy as np

    from dyno.trace_analysis import analyses as A
    from dyno.trace_analysis import api
    from dyno.trace_analysis.loader import load_traces
    from dyno.trace_analysis.rules import engine

    pc = time.perf_counter
    out: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = name(*args) if callable(name) else name
            t = pc()
            try:
                return fn(*args, **kwargs)
            finally:
                out[key] = out.get(key, 0.0) + (pc() - t) * 1e3

        return wrapper

    run_one, run_cross, summarize = engine._run_one, engine._run_cross, api.summarize_rank
    engine._run_one = timed(lambda rule, *_: f"rule {rule.id}", run_one)  # type: ignore[assignment]
    engine._run_cross = timed(lambda rule, *_: f"rule {rule.id}", run_cross)  # type: ignore[assignment]
    api.summarize_rank = timed("report summaries", summarize)  # type: ignore[assignment]

    def one_pass() -> dict[str, float]:
        out.clear()
        t0 = pc()
        traces = list(load_traces([path]))
        t1 = pc()
        for t in traces:
            for a in _ANALYSES:
                timed(a, getattr(A, a))(t)
        timed("rank_spread", A.rank_spread)(traces)
        t2 = pc()
        api.analyze_traces(traces)
        t3 = pc()
        out.update({"LOAD": (t1 - t0) * 1e3, "ANALYSES": (t2 - t1) * 1e3, "RULES": (t3 - t2) * 1e3})
        out["ANALYSES + RULES"] = out["ANALYSES"] + out["RULES"]
        out["TOTAL"] = (t3 - t0) * 1e3
        return dict(out)

    passes = [one_pass() for _ in range(1 + warm)]
    if warm:
        sweep = np.ones(64 << 20, dtype=np.uint8)
        sweep += 1
        passes.append(one_pass())
    return passes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument(
        "--warm",
        type=int,
        default=0,
        metavar="N",
        help="also N more passes in each process (best printed as 'warm') and one after evicting the CPU caches",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.warm)))
        return 0
    for path in args.paths:
        runs = []
        for _ in range(max(args.runs, 1)):
            cmd = [sys.executable, __file__, "--worker", path, "--warm", str(args.warm), path]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        fresh = {k: min(r[0][k] for r in runs) for k in runs[0][0]}
        print(f"{path}: best of {len(runs)} fresh processes, ms")
        if args.warm:
            warm = {k: min(p.get(k, 0.0) for r in runs for p in r[1:-1]) for k in fresh}
            swept = {k: min(r[-1].get(k, 0.0) for r in runs) for k in fresh}
            print(f"  {'':28s} {'fresh':>8s} {'warm':>8s} {'swept':>8s}  (swept: warm after a 64 MiB cache sweep)")
        for k, v in sorted(fresh.items(), key=lambda kv: (kv[0] != kv[0].upper(), -kv[1])):
            extra = f" {warm[k]:8.3f} {swept[k]:8.3f}" if args.warm else ""
            print(f"  {k:28s} {v:8.3f}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
