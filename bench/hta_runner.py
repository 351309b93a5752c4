"""Run HolisticTraceAnalysis on one trace folder (in HTA's own venv); print JSON figures and timings.

Used by bench/analysis_vs_hta.py as a subprocess: ``<hta-python> bench/hta_runner.py DIR [--full]``.
Default: load + temporal breakdown + idle-time breakdown (the benchmark's HTA workload). ``--full`` adds the
comm/comp overlap and the launch-queue summary (reference figures for comparing definitions); ``--load-only``
stops after ``TraceAnalysis(trace_dir)`` (bench/many_ranks.py: HTA's multi-rank load).
"""

from __future__ import annotations

import json
import logging
import resource
import sys
import time


def main() -> int:
    logging.disable(logging.WARNING)
    folder = sys.argv[1]
    full = "--full" in sys.argv
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # import inside the timing: part of HTA's cost

    t1 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=folder)
    t2 = time.perf_counter()
    if "--load-only" in sys.argv:
        print(json.dumps({"ranks": len(analyzer.t.get_ranks()), "timing_s": {"import": t1 - t0, "load": t2 - t1}}))
        return 0
    tb = analyzer.get_temporal_breakdown(visualize=False)
    out: dict = {"temporal": json.loads(tb.to_json(orient="records"))}
    idle: dict = {}
    for rank in analyzer.t.get_ranks():
        res = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)
        df = res[0] if isinstance(res, tuple) else res
        idle[rank] = json.loads(df.to_json(orient="records"))
    out["idle"] = idle
    t3 = time.perf_counter()
    if full:
        ov = analyzer.get_comm_comp_overlap(visualize=False)
        out["overlap"] = json.loads(ov.to_json(orient="records"))
        qs = analyzer.get_queue_length_summary(ranks=analyzer.t.get_ranks())
        out["queue"] = json.loads(qs.reset_index().to_json(orient="records")) if qs is not None else None
    out["work_s_hta"] = t3 - t1  # load + temporal + idle-time breakdown (the benchmark's workload)
    out["timing_s"] = {"import": t1 - t0, "load": t2 - t1, "analyses": t3 - t2, "total": t3 - t0}
    out["ru_maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:  # own peak RSS (see analysis_vs_hta.peak_rss_mib)
        hwm = [ln for ln in open("/proc/self/status").read().splitlines() if ln.startswith("VmHWM:")]
        out["vmhwm_mib"] = int(hwm[0].split()[1]) / 1024 if hwm else None
    except OSError:
        out["vmhwm_mib"] = None
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
