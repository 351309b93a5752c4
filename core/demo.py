"""The end-to-end demo on one host (README's first command runs it through scripts/demo.sh).

Starts a private dynod on free loopback ports (NVML when a driver is present, else explicitly simulated GPUs),
shows `dyno-cli status` and `dyno-cli metrics`, and cleans up every process it started, even on Ctrl-C.
"""

from __future__ import annotations

import argparse
import ctypes.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

__all__ = ["main"]

_READY = re.compile(r"ready: grpc=\S+:(\d+)")


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
        self.procs: list[subprocess.Popen] = []
        self.daemon_log: list[str] = []

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "dyno.client", *args]
        print("$ dyno-cli " + " ".join(args), flush=True)
        r = subprocess.run(cmd, text=True)
        if check and r.returncode != 0:
            raise SystemExit(f"demo: `dyno-cli {' '.join(args)}` failed with exit code {r.returncode}")
        return r

    def start_daemon(self) -> None:
        args = [
            sys.executable, "-m", "dyno.daemon", "--listen", "127.0.0.1", "--port", str(self.port),
            "--metrics-port", str(self.metrics_port), "--gpu-backend", self.gpu_backend, "--sim-gpus", "2",
            "--state-dir", str(self.workdir / "state"), "--trace-dir", str(self.trace_dir),
            "--agent-socket", str(self.agent_socket), "--kineto-endpoint", self.endpoint, "--interval-s", "0.5",
        ]
        print("$ dynod " + " ".join(args[3:]), flush=True)
        proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(proc)
        ready = threading.Event()

        def pump() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                self.daemon_log.append(line)
                if _READY.search(line):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(30) or proc.poll() is not None:
            raise SystemExit("demo: dynod did not start:\n" + "".join(self.daemon_log))
        print("".join(self.daemon_log), end="", flush=True)

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
        _banner("done")
        return 0

    def cleanup(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dyno-demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu-backend", choices=("auto", "nvml", "sim"), default="auto",
                   help="auto: nvml when an NVIDIA driver is present, else sim (default)")
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
