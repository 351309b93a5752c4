"""Benchmark: one job of many ranks, as processes: dyno-cli analyze (a process per core) vs one process vs HTA's load.

Not a test. Generates a job folder into a temporary directory (removed at the end; never committed): ``--ranks``
copies of a shared trace (``--source``, default trace_filter's rank 0, a real rank of a 128-rank job), each with
its own rank in ``distributedInfo``, its timeline stretched by a factor within ±``--noise`` (ranks never run
identical steps), and one rank (``--slow``) planted slow: its whole timeline stretched by ``--slow-factor``.

Children run with their bytecode cached, as an installed dyno (bench_common.bytecode_env). Each run is a fresh
process; wall time is the process's, from start to exit. Memory is sampled every 50 ms with
psutil over the process and its children (the workers): USS MiB, the largest sum of their unique memory (what the
run holds; a forked worker's pages shared with its parent counted once); RSS MiB, the largest sum of their RSS
(shared pages counted in each); 1 proc, the largest RSS of any one of them. Runs alternate between the tools,
``--repeat`` times; the tables print the median (and min) time and the largest peaks.

- dyno-cli: ``dyno-cli analyze --json DIR`` (by default a process per usable core: trace_analysis.rank_pool).
- dyno 1 proc: the same report from ``analyze(DIR, workers=1)`` in one process (checked byte-identical).
- HTA load: ``TraceAnalysis(trace_dir=DIR)`` in HTA's venv (``bench/hta_runner.py --load-only``), HTA 0.5.0's
  multi-rank load (it parses the ranks with a process pool too).
- scaling: ``analyze(DIR, workers=<cores>)`` and ``workers=1`` on the first 8, 16, 32 ... ranks of the same folder
  (the slow rank among them).

    python bench/many_ranks.py --hta-python /work/hta-venv/bin/python [--ranks 64] [--source trace_filter]
                               [--slow 5] [--repeat 3] [--scaling 8 16 32]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import psutil
from bench_common import bytecode_env, dyno_cli

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TRACES = REPO.parent / "shared" / "traces" / "gpu"
SOURCES = {
    "trace_filter": "trace_filter/sampled_rank-0.json.gz",
    "nccl_parser_config": "nccl_parser_config/nccl_data.json.gz",
    "ns_resolution_trace": "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "negative_queue_length_values_check": "negative_queue_length_values_check/rank0.json.gz",
}

# analyze(DIR, workers=N) as dyno-cli runs it (numpy with one OpenBLAS thread), the JSON report on stdout
_WITH_WORKERS = (
    "import sys\n"
    "from dyno.numpy_import import import_numpy_single_threaded\n"
    "import_numpy_single_threaded()\n"
    "from dyno.trace_analysis import analyze\n"
    "from dyno.trace_analysis.report import render_json\n"
    "sys.stdout.write(render_json(analyze(sys.argv[1], workers=int(sys.argv[2]))))\n"
)


def with_workers(folder: Path, n: int) -> list[str]:
    return [sys.executable, "-c", _WITH_WORKERS, str(folder), str(n)]


def generate(source: Path, out: Path, ranks: int, slow: int, slow_factor: float, noise: float) -> None:
    """``ranks`` perturbed copies of ``source`` in ``out`` (rank-N.json.gz), rank ``slow`` stretched."""
    with gzip.open(source, "rb") as fh:
        doc = orjson.loads(fh.read())
    events = doc["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), int | float))
    rng = random.Random(42)
    out.mkdir(parents=True)
    for r in range(ranks):
        f = slow_factor if r == slow else 1.0 + rng.uniform(-noise, noise)
        copied = []
        for e in events:
            e = dict(e)
            if isinstance(e.get("ts"), int | float):
                e["ts"] = t0 + (e["ts"] - t0) * f
            if isinstance(e.get("dur"), int | float):
                e["dur"] = e["dur"] * f
            copied.append(e)
        info = {**doc.get("distributedInfo", {}), "rank": r, "world_size": ranks}
        rank_doc = {"distributedInfo": info, **{k: v for k, v in doc.items() if k != "distributedInfo"}}
        rank_doc["traceEvents"] = copied
        # '"rank": N' with the space Kineto writes: HTA finds a file's rank with the regex '"rank":\s+(\d+)'
        data = orjson.dumps(rank_doc).replace(b'"rank":', b'"rank": ', 1)
        with gzip.open(out / f"rank-{r}.json.gz", "wb", compresslevel=6) as fh:
            fh.write(data)


def subset(folder: Path, out: Path, n: int) -> Path:
    """A folder of links to the first ``n`` ranks of ``folder``."""
    out.mkdir()
    for r in range(n):
        (out / f"rank-{r}.json.gz").symlink_to(folder / f"rank-{r}.json.gz")
    return out


# set by main(): every child reads its bytecode from one cache (bench_common.bytecode_env)
ENV: dict[str, str] | None = None
_WARM_UP = (
    "import dyno.client.cli, dyno.client.commands.analyze, dyno.trace_analysis.api, dyno.trace_analysis.rank_pool, "
    "dyno.trace_analysis.report"
)


def run(cmd: list[str]) -> tuple[float, dict[str, float], bytes]:
    """(wall s, memory peaks in MiB, stdout) of one process run. Peaks, sampled every 50 ms over the process and its
    children: "uss", the largest sum of their unique memory (USS: what the run holds, pages a forked worker shares
    with its parent counted once); "rss", the largest sum of their RSS (shared pages counted in each); "proc", the
    largest RSS of any one process."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=REPO, env=ENV)
        peak = {"uss": 0.0, "rss": 0.0, "proc": 0.0}
        done = threading.Event()

        def sample() -> None:
            try:
                p = psutil.Process(proc.pid)
                while not done.is_set():
                    uss = rss = 0
                    for q in [p, *p.children(recursive=True)]:
                        try:
                            mem = q.memory_full_info()
                        except psutil.Error:
                            continue
                        uss, rss = uss + mem.uss, rss + mem.rss
                        peak["proc"] = max(peak["proc"], mem.rss / 2**20)
                    peak["uss"], peak["rss"] = max(peak["uss"], uss / 2**20), max(peak["rss"], rss / 2**20)
                    time.sleep(0.05)
            except psutil.Error:
                pass

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {code}: {err.decode(errors='replace')[-2000:]}")
    return wall, peak, out


def straggler(report_json: bytes) -> str:
    doc = json.loads(report_json)
    found = [f for f in doc["findings"] if f["rule"] == "straggler"]
    return ", ".join(f"rank {f['rank']}" for f in found) or "none"


_MEASURES = f"{'median s':>9} {'min s':>7} {'USS MiB':>8} {'RSS MiB':>8} {'1 proc':>7}"


def _row(label: str, rs: list[tuple[float, dict[str, float], bytes]], note: str, width: int = 12) -> str:
    walls = [r[0] for r in rs]
    uss, rss, one = (max(r[1][k] for r in rs) for k in ("uss", "rss", "proc"))
    return (
        f"{label:<{width}} {statistics.median(walls):>9.2f} {min(walls):>7.2f} {uss:>8.0f} {rss:>8.0f} {one:>7.0f}"
        f"  {note}"
    ).rstrip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis==0.5.0 (HTA skipped if absent)")
    ap.add_argument("--source", choices=sorted(SOURCES), default="trace_filter")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--slow", type=int, default=5, help="the rank planted slow")
    ap.add_argument("--slow-factor", type=float, default=1.3)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaling", type=int, nargs="*", default=[8, 16, 32], help="rank counts for the scaling rows")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="dyno-many-ranks-"))
    global ENV
    ENV = bytecode_env(tmp / "pycache")
    try:
        subprocess.run([sys.executable, "-c", _WARM_UP], check=True, env=ENV)  # fills the bytecode cache
        job = tmp / "job"
        t0 = time.perf_counter()
        generate(TRACES / SOURCES[args.source], job, args.ranks, args.slow, args.slow_factor, args.noise)
        size = sum(f.stat().st_size for f in job.iterdir())
        print(
            f"{args.ranks} ranks of {args.source} ({size / 2**20:.1f} MiB gzip), rank {args.slow} x{args.slow_factor}"
            f" slower, generated in {time.perf_counter() - t0:.1f} s; usable cores: {len(os.sched_getaffinity(0))}"
        )
        cores = len(os.sched_getaffinity(0))
        tools: dict[str, list[str]] = {
            "dyno-cli": [*dyno_cli(), "analyze", "--json", str(job)],
            "dyno 1 proc": with_workers(job, 1),
        }
        if args.hta_python:
            tools["HTA load"] = [args.hta_python, str(HERE / "hta_runner.py"), str(job), "--load-only"]
        results: dict[str, list[tuple[float, dict[str, float], bytes]]] = {k: [] for k in tools}
        names = list(tools)
        for i in range(args.repeat):
            for name in names[i % len(names) :] + names[: i % len(names)]:  # alternate who goes first
                results[name].append(run(tools[name]))
        print(
            f"\n{'run':<12} {'median s':>9} {'min s':>7} {'USS MiB':>8} {'RSS MiB':>8} {'1 proc':>7}  straggler named"
        )
        for name, rs in results.items():
            print(_row(name, rs, straggler(rs[0][2]) if name.startswith("dyno") else "(load only)"))
        same = results["dyno-cli"][0][2] == results["dyno 1 proc"][0][2]
        print(f"dyno-cli (a process per core) and 1-process reports byte-identical: {same}")
        if "HTA load" in results:
            hta = statistics.median(r[0] for r in results["HTA load"])
            cli = statistics.median(r[0] for r in results["dyno-cli"])
            print(f"HTA load / dyno-cli (whole analysis): {hta / cli:.1f}x")
        if args.scaling:
            print(f"\nscaling: workers={cores} (the pool) vs workers=1, on the first N ranks")
            print(
                f"{'ranks':>5} {'workers':>7} {'median s':>9} {'min s':>7} {'USS MiB':>8} {'RSS MiB':>8} {'1 proc':>7}"
            )
            for n in [*sorted(n for n in args.scaling if n < args.ranks), args.ranks]:
                folder = job if n == args.ranks else subset(job, tmp / f"first-{n}", n)
                for w in (cores, 1):
                    rs = []
                    for _ in range(args.repeat):
                        rs.append(run(with_workers(folder, w)))
                    print(_row(f"{n:>5} {w:>7}", rs, "", width=13))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
