"""Benchmark: dyno's trace analysis vs HolisticTraceAnalysis 0.5.0 vs a bare ``orjson.loads`` (prints a table).

Not a test. Every measurement runs in a fresh subprocess; wall time is measured inside the worker around the
work (interpreter start-up and imports excluded, reported separately as "proc s"), peak RSS is the worker's
``ru_maxrss`` (from ``os.wait4``). Each timing is the best of ``--repeat`` runs.

- dyno:  load (gzip + block-wise parse) + every analysis + every rule (``analyze_traces``) on the same load.
- HTA:   ``TraceAnalysis(trace_dir)`` + ``get_temporal_breakdown`` + ``get_idle_time_breakdown`` (run with
         ``--hta-python``, the interpreter of a venv where ``HolisticTraceAnalysis==0.5.0`` is installed).
- json:  ``orjson.loads`` of the already decompressed bytes of the same files.
- dyno-py: the same dyno run with the native decoder turned off (``DYNO_NATIVE_PARSE=0``: msgspec/orjson path),
         printed beside it for comparison (``--python-parse`` makes every dyno run use the Python path).

Targets (issue 4): dyno >= 10x faster than HTA, <= 0.5x HTA's peak RSS, <= 1.5x the bare parse time; and a
synthetic trace of >= 2 million events analyzed with peak RSS below its uncompressed JSON size.

    python bench/analysis_vs_hta.py --hta-python /work/hta-venv/bin/python [--traces DIR] [--events 2000000]
                                    [--python-parse] [--cases simple_add alexnet]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from synthetic_trace import write_synthetic_trace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


# --------------------------------------------------------------------------------------------------------------
# workers (run in fresh subprocesses)


def _parser_used() -> str:
    """Which decoder and gzip reader the loads of this worker use."""
    from dyno.trace_analysis import traceopen
    from dyno.trace_analysis.eventdecode import native_enabled

    return f"{'native' if native_enabled() else 'python'}+{traceopen._GZIP.__name__.rsplit('.', 1)[-1]}"


def _worker_dyno(paths: list[str]) -> dict[str, Any]:
    from dyno.trace_analysis import analyses as A
    from dyno.trace_analysis.loader import load_traces

    try:
        from dyno.trace_analysis.api import analyze_traces
    except ImportError:  # rules/report not available: analyses only
        analyze_traces = None

    t0 = time.perf_counter()
    multi = load_traces(paths)
    t1 = time.perf_counter()
    traces = list(multi)
    for t in traces:
        A.temporal_breakdown(t)
        A.idle_time_breakdown(t)
        A.kernel_breakdown(t)
        A.comm_comp_overlap(t)
        A.launch_stats(t)
        A.queue_length(t)
        A.memory_copies(t)
        A.step_timings(t)
        A.cpu_op_summary(t)
    A.rank_spread(traces)
    t2 = time.perf_counter()
    n_findings = -1
    if analyze_traces is not None:
        report = analyze_traces(traces)
        n_findings = len(report.findings)
    t3 = time.perf_counter()
    return {
        "work_s": t3 - t0,
        "load_s": t1 - t0,
        "analyses_s": t2 - t1,
        "rules_s": t3 - t2,
        "events": sum(len(t.events) + len(t.flows) for t in traces),
        "findings": n_findings,
        "parser": _parser_used(),
    }


def _worker_load(paths: list[str]) -> dict[str, Any]:
    from dyno.trace_analysis.loader import load_traces

    t0 = time.perf_counter()
    multi = load_traces(paths)
    work = time.perf_counter() - t0
    return {"work_s": work, "events": sum(len(t.events) + len(t.flows) for t in multi), "parser": _parser_used()}


def _worker_json(paths: list[str]) -> dict[str, Any]:
    import orjson

    datas = [Path(p).read_bytes() for p in paths]
    t0 = time.perf_counter()
    for d in datas:
        obj = orjson.loads(d)
        del obj
    return {"work_s": time.perf_counter() - t0}


def peak_rss_mib() -> float | None:
    """This process's own peak RSS (VmHWM of its address space). ru_maxrss is not used: Linux folds the RSS the
    forked child inherited from the (large) benchmark parent into it before exec, inflating small workers."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _worker_main(kind: str, paths: list[str]) -> int:
    out = {"dyno": _worker_dyno, "load": _worker_load, "json": _worker_json}[kind](paths)
    out["vmhwm_mib"] = peak_rss_mib()
    print(json.dumps(out))
    return 0


# --------------------------------------------------------------------------------------------------------------
# parent


PYTHON_PARSE = {"DYNO_NATIVE_PARSE": "0"}


def _run_child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float, float]:
    """Run a worker (``env``: added variables); return (its JSON output, process wall s, its peak RSS in MiB:
    VmHWM, else wait4's maxrss)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=REPO, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed: {err.decode(errors='replace')[-2000:]}")
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1])
    own = result.get("vmhwm_mib")
    return result, wall, own if own is not None else usage.ru_maxrss / 1024


def _best(cmd: list[str], repeat: int, time_key: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    runs = [_run_child(cmd, env) for _ in range(repeat)]
    best = min(runs, key=lambda r: r[0][time_key])
    return {
        "out": best[0],
        "work_s": best[0][time_key],
        "proc_s": min(r[1] for r in runs),
        "rss_mib": max(r[2] for r in runs),
    }


def _decompressed(files: list[Path], tmp: Path) -> list[str]:
    out = []
    for f in files:
        dst = tmp / (f.name.removesuffix(".gz") + ".raw.json")
        with open(f, "rb") as fh:
            data = gzip.decompress(fh.read()) if f.name.endswith(".gz") else fh.read()
        dst.write_bytes(data)
        out.append(str(dst))
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def main(argv: list[str] | None = None) -> int:
    # here, not at the top: the measured --worker processes run this file too, and bench_common imports dyno
    from bench_common import HTA_CASES, SHARED_GPU_TRACES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--hta-python", help="python of a venv with HolisticTraceAnalysis==0.5.0 (HTA columns skipped if absent)"
    )
    ap.add_argument("--traces", type=Path, default=SHARED_GPU_TRACES, help="folder of the shared GPU traces")
    ap.add_argument(
        "--cases", nargs="+", choices=HTA_CASES, default=HTA_CASES, metavar="CASE", help="only these traces"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--events", type=int, default=2_000_000, help="synthetic trace size (0: skip)")
    ap.add_argument("--json", dest="json_out", type=Path, help="also write the results as JSON")
    ap.add_argument(
        "--python-parse", action="store_true", help="dyno without the native decoder (DYNO_NATIVE_PARSE=0) everywhere"
    )
    ap.add_argument("--worker", choices=["dyno", "load", "json"], help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker_main(args.worker, args.paths)

    me = [sys.executable, str(Path(__file__).resolve())]
    env = PYTHON_PARSE if args.python_parse else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="dyno-bench-") as tmpd:
        tmp = Path(tmpd)
        for case in args.cases:
            folder = args.traces / case
            files = sorted(folder.glob("*.json*"))
            if not files:
                print(f"skip {case}: no files under {folder}", file=sys.stderr)
                continue
            raw = _decompressed(files, tmp)
            dyno = _best([*me, "--worker", "dyno", *map(str, files)], args.repeat, "work_s", env)
            dyno_py = _best([*me, "--worker", "dyno", *map(str, files)], args.repeat, "work_s", PYTHON_PARSE)
            bare = _best([*me, "--worker", "json", *raw], args.repeat, "work_s")
            hta = None
            if args.hta_python:
                hta = _best([args.hta_python, str(HERE / "hta_runner.py"), str(folder)], args.repeat, "work_s_hta")
            rows.append(
                {
                    "case": case,
                    "mb": sum(Path(r).stat().st_size for r in raw) / 2**20,
                    "dyno": dyno,
                    "dyno_py": dyno_py,
                    "json": bare,
                    "hta": hta,
                }
            )
            for r in raw:
                Path(r).unlink()
        synth = None
        if args.events:
            sp = tmp / "synthetic.json"
            size = write_synthetic_trace(sp, args.events)
            dyno = _best([*me, "--worker", "dyno", str(sp)], 1, "work_s", env)
            load = _best([*me, "--worker", "load", str(sp)], 1, "work_s", env)
            bare = _best([*me, "--worker", "json", str(sp)], 1, "work_s")
            synth = {
                "events": dyno["out"]["events"],
                "json_mib": size / 2**20,
                "dyno": dyno,
                "load": load,
                "json": bare,
            }
    _print(rows, synth)
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "synthetic": synth}, indent=1, default=str))
    return 0


def _print(rows: list[dict[str, Any]], synth: dict[str, Any] | None) -> None:
    hdr = (
        f"{'trace':<36} {'MiB':>6} {'dyno s':>7} {'json s':>7} {'HTA s':>7} {'dyno/json':>9} {'HTA/dyno':>8} "
        f"{'dyno MiB':>8} {'HTA MiB':>8} {'dyno/HTA':>8} {'findings':>8} {'dyno-py s':>9}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        d, j, h = r["dyno"], r["json"], r["hta"]
        print(
            f"{r['case']:<36} {r['mb']:>6.1f} {d['work_s']:>7.3f} {j['work_s']:>7.3f} "
            f"{(h['work_s'] if h else float('nan')):>7.3f} {_ratio(d['work_s'], j['work_s']):>9} "
            f"{(_ratio(h['work_s'], d['work_s']) if h else 'n/a'):>8} {d['rss_mib']:>8.0f} "
            f"{(h['rss_mib'] if h else float('nan')):>8.0f} {(_ratio(d['rss_mib'], h['rss_mib']) if h else 'n/a'):>8} "
            f"{d['out']['findings']:>8} {r['dyno_py']['work_s']:>9.3f}"
        )
    print("(s = in-process wall time of the work, best of N; MiB = peak RSS (VmHWM) of the fresh worker process;")
    print(" targets: HTA/dyno >= 10x, dyno/HTA RSS <= 0.5x, dyno/json <= 1.5x;")
    if rows:
        print(f" dyno parser: {rows[0]['dyno']['out']['parser']}; dyno-py s: the same with DYNO_NATIVE_PARSE=0)")
    for r in rows:
        d, h = r["dyno"], r["hta"]
        o = d["out"]
        print(
            f"  {r['case']}: dyno load {o['load_s']:.3f}s analyses {o['analyses_s']:.3f}s rules {o['rules_s']:.3f}s"
            f" (process {d['proc_s']:.2f}s); Python parse: load {r['dyno_py']['out']['load_s']:.3f}s"
            + (f"; HTA process {h['proc_s']:.2f}s" if h else "")
        )
    if synth:
        d, ld, js = synth["dyno"], synth["load"], synth["json"]
        o = d["out"]
        jm = synth["json_mib"]

        def verdict(x: float) -> str:
            return "OK" if x < jm else "MISSED"

        print(
            f"synthetic ({o['parser']}): {synth['events']:,} events, JSON {jm:.0f} MiB "
            f"(bare orjson.loads {js['work_s']:.1f}s, peak RSS {js['rss_mib']:.0f} MiB incl. the bytes)"
        )
        print(
            f"  dyno full: {d['work_s']:.1f}s (load {o['load_s']:.1f}s, analyses {o['analyses_s']:.1f}s, rules "
            f"{o['rules_s']:.1f}s), peak RSS {d['rss_mib']:.0f} MiB = {d['rss_mib'] / jm:.2f}x JSON "
            f"[{verdict(d['rss_mib'])}]"
        )
        print(
            f"  dyno load only: {ld['work_s']:.1f}s, peak RSS {ld['rss_mib']:.0f} MiB = {ld['rss_mib'] / jm:.2f}x "
            f"JSON [{verdict(ld['rss_mib'])}]"
        )


if __name__ == "__main__":
    sys.exit(main())
