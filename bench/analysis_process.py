"""Benchmark: the time a user waits, as whole processes: ``dyno-cli analyze --json`` vs HTA's process vs
``python -c "import numpy"``, on every shared trace; and dyno-cli's start-up per command.

Not a test. Each figure is a fresh process timed from start to exit (interpreter start-up, imports, load, analysis,
output): what a user waits for at the prompt, unlike bench/analysis_vs_hta.py, which times the work inside the
process. Runs alternate between the tools (each round starts with the next one), ``--repeat`` rounds; the table
prints the median and the min.

- dyno:  ``dyno-cli analyze --json DIR`` (the venv's console script; the JSON report to /dev/null).
- HTA:   ``bench/hta_runner.py DIR`` in HTA's venv: import + ``TraceAnalysis(trace_dir)`` + temporal breakdown +
         idle-time breakdown (the workload of bench/analysis_vs_hta.py).
- numpy: ``python -c "import numpy"`` in dyno's venv, the floor of any numpy tool.

Every child runs with its bytecode cached (bench_common.bytecode_env), as an installed dyno (pip byte-compiles it)
and HTA's venv run: this project's dev machines set PYTHONDONTWRITEBYTECODE, under which the editable dyno compiled
every module in every run. One untimed run of each command fills the cache.

Targets (issue 21): HTA / dyno >= 10x on every shared trace; dyno / numpy <= 2x on the 0.3 MiB traces; dyno-cli's
start-up as short as each command's work allows. The start-up table times `--help` of every command and
`dyno-cli status` against a real dynod started for it (bench/soak/dynod.py: sim GPUs, a loopback port).

    python bench/analysis_process.py --hta-python /work/hta-venv/bin/python [--repeat 5] [--cases simple_add ...]
    python bench/analysis_process.py --startup-only --repeat 7
    python bench/analysis_process.py --hta-python /work/hta-venv/bin/python --no-startup   (the analysis table only)
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import HTA_CASES, SHARED_GPU_TRACES, bytecode_env, dyno_cli

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SMALL = ("simple_add", "alexnet")  # the 0.3 MiB traces of the dyno/numpy target


# set by main(): every child reads its bytecode from one cache (bench_common.bytecode_env)
ENV: dict[str, str] | None = None


def wall(cmd: list[str], cpu: list[float] | None = None) -> float:
    """Seconds from start to exit of ``cmd`` (its output discarded; a failure raises). ``cpu``: gets the CPU
    seconds (user + system) the process used, which the load of a shared machine inflates far less than its wall
    time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=ENV)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def alternate(
    tools: dict[str, list[str]], repeat: int, cpu: dict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """``repeat`` rounds of every tool, each round starting with the next one (after one untimed run of each, which
    fills the bytecode cache). ``cpu``: gets each tool's CPU seconds per run."""
    for cmd in tools.values():
        wall(cmd)
    times: dict[str, list[float]] = {k: [] for k in tools}
    names = list(tools)
    for i in range(repeat):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            times[name].append(wall(tools[name], None if cpu is None else cpu.setdefault(name, [])))
    return times


def _fmt(ts: list[float]) -> str:
    return f"{statistics.median(ts):>6.3f} {min(ts):>6.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis==0.5.0 (HTA skipped if absent)")
    ap.add_argument("--traces", type=Path, default=SHARED_GPU_TRACES, help="folder of the shared GPU traces")
    ap.add_argument("--cases", nargs="+", choices=HTA_CASES, default=HTA_CASES, metavar="CASE")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--startup-only", action="store_true", help="only dyno-cli's start-up table")
    ap.add_argument("--no-startup", action="store_true", help="only the analysis table")
    args = ap.parse_args(argv)
    global ENV
    cache = tempfile.TemporaryDirectory(prefix="dyno-bench-pycache-")
    ENV = bytecode_env(cache.name)

    cli = dyno_cli()
    if not args.startup_only:
        _analysis_table(args, cli)
    if not args.no_startup:
        _startup_table(cli, args.repeat)
    cache.cleanup()
    return 0


def _analysis_table(args: argparse.Namespace, cli: list[str]) -> None:
    numpy = [sys.executable, "-c", "import numpy"]
    print(
        f"{'trace':<36} {'MiB':>5} {'dyno s':>6} {'(min)':>6} {'HTA s':>6} {'(min)':>6} {'numpy s':>7} "
        f"{'HTA/dyno':>8} {'dyno/numpy':>10}   {'CPU dyno':>8} {'HTA':>6} {'numpy':>6} {'HTA/dyno':>8}"
    )
    for case in args.cases:
        folder = args.traces / case
        tools = {"dyno": [*cli, "analyze", "--json", str(folder)], "numpy": numpy}
        if args.hta_python:
            tools["HTA"] = [args.hta_python, str(HERE / "hta_runner.py"), str(folder)]
        cpu: dict[str, list[float]] = {}
        t = alternate(tools, args.repeat, cpu)
        mib = sum(f.stat().st_size for f in folder.glob("*.json*")) / 2**20
        d, n = statistics.median(t["dyno"]), statistics.median(t["numpy"])
        hta = f"{_fmt(t['HTA'])} " if "HTA" in t else f"{'n/a':>6} {'':>6} "
        ratio = f"{statistics.median(t['HTA']) / d:>7.1f}x" if "HTA" in t else f"{'n/a':>8}"
        c = {k: statistics.median(v) for k, v in cpu.items()}
        cpu_hta = f"{c['HTA']:>6.3f}" if "HTA" in c else f"{'n/a':>6}"
        cpu_ratio = f"{c['HTA'] / c['dyno']:>7.1f}x" if "HTA" in c else f"{'n/a':>8}"
        walls = f"{_fmt(t['dyno'])} {hta}{n:>7.3f} {ratio} {d / n:>9.2f}x"
        print(f"{case:<36} {mib:>5.2f} {walls}   {c['dyno']:>8.3f} {cpu_hta} {c['numpy']:>6.3f} {cpu_ratio}")
    print("(s: whole process, start to exit, median and min of the runs; MiB: the trace files as stored (gzip);")
    print(" CPU: user + system s of the process and its children, median: a shared machine's load inflates it far")
    print(
        " less than the wall time; targets: HTA/dyno >= 10x everywhere, dyno/numpy <= 2x on "
        + " and ".join(SMALL)
        + ")"
    )


def _startup_table(cli: list[str], repeat: int) -> None:
    """Every command's --help (parses and prints only), and `dyno-cli status` answered by a real dynod."""
    from soak.dynod import Dynod

    from dyno.client.commands._catalog import COMMANDS

    startup = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dyno-cli --help": [*cli, "--help"],
        **{f"dyno-cli {name} --help": [*cli, name, "--help"] for name in COMMANDS},
    }
    with tempfile.TemporaryDirectory(prefix="dyno-bench-startup-", dir="/tmp") as root:
        dynod = Dynod(Path(root))
        dynod.start()
        try:
            startup["dyno-cli status (a dynod answers)"] = [*cli, "status", "--host", dynod.target]
            cpu: dict[str, list[float]] = {}
            times = alternate(startup, repeat, cpu)
        finally:
            dynod.stop()
    print("\ndyno-cli start-up (whole process, start to exit; s, median and min; CPU: user + system s, median)")
    for name, ts in times.items():
        print(f"  {name:<36} {_fmt(ts)}  CPU {statistics.median(cpu[name]):.3f}")


if __name__ == "__main__":
    sys.exit(main())
