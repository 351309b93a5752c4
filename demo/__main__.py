"""The end-to-end demo on one host (README's first command runs it through scripts/demo.sh).

1. starts a private dynod on free loopback ports (NVML when a driver is present, else explicitly simulated GPUs)
   and shows `dyno-cli status` and `dyno-cli metrics`;
2. launches a real 2-rank PyTorch CPU DDP job (`torchrun --nproc-per-node 2`, gloo) under `dyno-run`, with one
   deliberately slow rank and deliberate antipatterns (see dyno.demo_trainer);
3. traces it on demand with `dyno-cli trace --job-id`, gathers the files and prints the analysis report
   (straggler and antipatterns);
4. meanwhile dynod's periodic profiling traces that job and a second one (one rank, a Python loop of tiny ops) on
   its own schedule and analyses every trace on the host; the demo waits for both jobs' periodic analyses and shows
   `dyno-cli jobs` and `dyno-cli opportunities` (the antipatterns ranked by the GPU-hours they cost);
5. cleans up every process it started, even on Ctrl-C or failure.
"""

from __future__ import annotations

import argparse
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dyno.daemon.process import DynodProcess

__all__ = ["main"]

PERIODIC_INTERVAL_S = 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _has_nvidia_driver() -> bool:
    return ctypes.util.find_library("nvidia-ml") is not None


def _banner(text: str) -> None:
    print(f"\n\033[1m=== {text}\033[0m" if sys.stdout.isatty() else f"\n=== {text}", flush=True)


class Demo:
    def __init__(self, workdir: Path, gpu_backend: str) -> None:
        self.workdir = workdir
        self.gpu_backend = gpu_backend
        self.port = _free_port()
        self.metrics_port = _free_port()
        self.endpoint = f"dyno-demo-{uuid.uuid4().hex[:8]}"
        self.agent_socket = workdir / "agent.sock"
        self.trace_dir = workdir / "traces"
        self.procs: dict[str, subprocess.Popen] = {}  # job id -> its launcher (each in its own process group)
        self.daemon: DynodProcess | None = None

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "dyno.client", *args]
        print("$ dyno-cli " + " ".join(args), flush=True)
        r = subprocess.run(cmd, text=True)
        if check and r.returncode != 0:
            raise SystemExit(f"demo: `dyno-cli {' '.join(args)}` failed with exit code {r.returncode}")
        return r

    def start_daemon(self) -> None:
        from dyno.daemon.process import DynodProcess, DynodStartError

        args = [
            "--listen", "127.0.0.1",
            "--port", str(self.port),
            "--metrics-port", str(self.metrics_port),
            "--gpu-backend", self.gpu_backend,
            "--sim-gpus", "2",
            "--state-dir", str(self.workdir / "state"),
            "--trace-dir", str(self.trace_dir),
            "--agent-socket", str(self.agent_socket),
            "--kineto-endpoint", self.endpoint,
            "--interval-s", "0.5",
            # periodic profiling at a demo's pace: a job is traced every 10 s once 3 s old, 10 steps of its two
            # lowest ranks, within 30% of its time (a fleet's: every 1800 s, 1%; docs/PERIODIC.md)
            "--periodic-interval-s", str(PERIODIC_INTERVAL_S),
            "--periodic-min-job-age-s", "3",
            "--periodic-iterations", "10",
            "--periodic-ranks-per-host", "2",
            "--periodic-budget", "0.3",
        ]  # fmt: skip
        print("$ dynod " + " ".join(args), flush=True)
        daemon = self.daemon = DynodProcess(args, new_session=True)
        try:
            daemon.start(timeout_s=30)
        except DynodStartError as e:
            raise SystemExit(f"demo: {e}") from None
        print(daemon.log, end="", flush=True)

    def run(self) -> int:
        _banner(f"1. start dynod (GPU backend: {self.gpu_backend})")
        self.start_daemon()
        time.sleep(1.2)  # a few samples, so rates (CPU %, net) have a previous value
        target = ["--host", "127.0.0.1", "--port", str(self.port)]
        _banner("2. dyno-cli status")
        self.cli("status", *target)
        _banner("3. dyno-cli metrics")
        self.cli("metrics", *target)
        _banner(f"4. Prometheus scrape: http://127.0.0.1:{self.metrics_port}/metrics (first lines)")
        import urllib.request

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        gpu_lines = [ln for ln in text.splitlines() if ln.startswith("dyno_gpu_utilization_percent")]
        print("\n".join(gpu_lines[:4]))
        _banner("5. launch a 2-rank DDP training job under dyno-run (torchrun, gloo, CPU), and a second, 1-rank job")
        job_id = f"demo-{uuid.uuid4().hex[:6]}"
        self.start_trainer(job_id)
        second_job = f"demo-tinyops-{uuid.uuid4().hex[:6]}"
        self.start_trainer(second_job, ranks=1, extra=("--slow-rank", "-1", "--tiny-ops", "3000"))
        self.wait_for_ranks(job_id, 2)
        self.wait_for_ranks(second_job, 1)
        self.cli("ps", *target, "--job-id", job_id)
        _banner(f"6. dyno-cli trace --job-id {job_id}: trace 20 optimizer steps on every rank, gather, analyze")
        out = self.workdir / "collected"
        r = self.cli(
            "trace",
            *target,
            "--job-id",
            job_id,
            "--iterations",
            "20",
            "--output-dir",
            str(out),
            check=False,
        )
        if r.returncode != 0:
            raise SystemExit(f"demo: tracing failed (exit {r.returncode})")
        files = sorted(str(p) for p in out.rglob("*.json*") if p.name != "manifest.json")
        if not self._trace_prints_report:
            _banner("7. dyno-cli analyze")
            self.cli("analyze", *files)
        _banner(f"7. periodic profiling (every {PERIODIC_INTERVAL_S} s here): both jobs' traces, analysed on the host")
        self.wait_for_periodic_analyses((job_id, second_job))
        _banner("8. dyno-cli jobs: every job's GPU use on this host, with its latest analysis")
        self.cli("jobs", *target)
        _banner("9. dyno-cli opportunities: the antipatterns ranked by the GPU-hours they cost")
        self.cli("opportunities", *target)
        _banner(
            "done: the report above names the slow rank and the antipatterns planted in dyno.demo_trainer; the ranking "
            "names each job's problem"
        )
        return 0

    _trace_prints_report = True  # dyno-cli trace analyzes what it fetched and prints the report

    def start_trainer(self, job_id: str, ranks: int = 2, extra: tuple[str, ...] = ()) -> None:
        env = {**os.environ, "DYNO_AGENT_SOCKET": str(self.agent_socket), "OMP_NUM_THREADS": "1"}
        cmd = [
            sys.executable,
            "-m",
            "dyno.client.run",
            "--job-id",
            job_id,
            "--",
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(ranks),
            "-m",
            "dyno.demo_trainer",
            "--seconds",
            "150",
            "--steps",
            "100000",
            *extra,
        ]
        print(
            f"$ DYNO_AGENT_SOCKET={self.agent_socket} dyno-run --job-id {job_id} -- torchrun --standalone "
            f"--nproc-per-node {ranks} -m dyno.demo_trainer {' '.join(extra)}".rstrip(),
            flush=True,
        )
        log = open(self.workdir / f"trainer-{job_id}.log", "w")
        self.procs[job_id] = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_for_ranks(self, job_id: str, n: int, timeout_s: float = 90.0) -> None:
        from dyno.client import DynoClient

        deadline = time.monotonic() + timeout_s
        with DynoClient(f"127.0.0.1:{self.port}") as c:
            while time.monotonic() < deadline:
                ranks = {p.rank for p in c.list_processes(job_id).processes if p.HasField("rank")}
                if len(ranks) >= n:
                    return
                if self.procs[job_id].poll() is not None:  # this job ended before registering
                    break
                time.sleep(0.5)
        log = (self.workdir / f"trainer-{job_id}.log").read_text()
        raise SystemExit(f"demo: the training job's {n} ranks did not register; its output:\n{log[-3000:]}")

    def wait_for_periodic_analyses(self, job_ids: tuple[str, ...], timeout_s: float = 150.0) -> None:
        """Until each job's latest analysis on this host is of a periodic trace and finished (done or failed)."""
        from dyno.client import DynoClient
        from dyno.v1 import dyno_pb2

        finished = (dyno_pb2.ANALYSIS_STATE_DONE, dyno_pb2.ANALYSIS_STATE_FAILED)
        shown: set[str] = set()
        deadline = time.monotonic() + timeout_s
        with DynoClient(f"127.0.0.1:{self.port}") as c:
            while time.monotonic() < deadline and len(shown) < len(job_ids):
                for rec in c.list_jobs().jobs:
                    a = rec.latest_analysis
                    if rec.job_id in job_ids and rec.job_id not in shown and a.periodic and a.state in finished:
                        shown.add(rec.job_id)
                        rules = ", ".join(f"{r.rule} {r.time_lost_share:.0%}" for r in a.rules) or "no finding"
                        if a.state == dyno_pb2.ANALYSIS_STATE_FAILED:
                            rules = f"analysis failed: {a.failure_message}"
                        print(f"{rec.job_id}: trace {a.trace_id} analysed on the host: {rules}", flush=True)
                time.sleep(1.0)
        if len(shown) < len(job_ids):
            missing = ", ".join(sorted(set(job_ids) - shown))
            raise SystemExit(f"demo: no periodic analysis of {missing} within {timeout_s:.0f} s (see dynod's log)")

    def cleanup(self) -> None:
        """The training jobs' whole process groups first (torchrun and its ranks), then the daemon."""
        for proc in reversed(self.procs.values()):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.daemon is not None:
            self.daemon.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="dyno-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--gpu-backend",
        choices=("auto", "nvml", "sim"),
        default="auto",
        help="auto: nvml when an NVIDIA driver is present, else sim (default)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (traces, logs)")
    args = p.parse_args(argv)
    backend = args.gpu_backend
    if backend == "auto":
        backend = "nvml" if _has_nvidia_driver() else "sim"
    workdir = Path(tempfile.mkdtemp(prefix="dyno-demo-", dir="/tmp"))
    demo = Demo(workdir, backend)
    try:
        return demo.run()
    except KeyboardInterrupt:
        return 130
    finally:
        demo.cleanup()
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
