"""Tracing benchmarks against a real dynod on loopback (prints figures; no pass/fail).

1. Request-to-file latency of a 500 ms trace: agent path (`dyno-run` trainer; target <= duration + 0.5 s) and
   libkineto path (KINETO_USE_DAEMON=1 trainer, poll interval 1 s via KINETO_CONFIG; reported).
2. FetchTraceFile throughput for a 200 MB file vs a plain TCP socket copy of the same file on loopback in the same
   run (target >= 50%), and the daemon's RSS before / peak while streaming (should stay flat: no whole-file reads).

    python bench/trace_latency.py [--size-mb 200] [--repeats 3] [--skip-latency] [--skip-fetch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dyno.client.client import DynoClient
from dyno.daemon.process import READY_LINE
from dyno.filechunks import checksum_file
from dyno.v1 import dyno_pb2

REPO = Path(__file__).resolve().parent.parent
TRAINER = REPO / "tests" / "integration" / "tracing_trainer.py"


class Daemon:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.kineto_dir = root / "k"
        self.socket = root / "agent.sock"
        self.trace_dir = root / "traces"
        args = [
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--gpu-backend",
            "none",
            "--state-dir",
            str(root / "state"),
            "--trace-dir",
            str(self.trace_dir),
            "--agent-socket",
            str(self.socket),
            "--kineto-socket-dir",
            str(self.kineto_dir),
            "--log-level",
            "warning",
        ]
        self.log = open(root / "dynod.log", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dyno.daemon", *args, "--log-level", "info"],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 30
        while True:
            m = READY_LINE.search((root / "dynod.log").read_text())
            if m:
                self.port = int(m["port"])
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dynod did not start:\n" + (root / "dynod.log").read_text())
            time.sleep(0.05)
        self.client = DynoClient(f"127.0.0.1:{self.port}", timeout_s=10)
        self.hostname = self.client.status().hostname

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _spawn_trainer(d: Daemon, protocol: str, job: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if protocol == "kineto":
        conf = d.root / "kineto.conf"
        conf.write_text("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        env.update(
            KINETO_USE_DAEMON="1", KINETO_IPC_SOCKET_DIR=str(d.kineto_dir), KINETO_CONFIG=str(conf), SLURM_JOB_ID=job
        )
        cmd = [sys.executable, str(TRAINER)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "dyno.client.run",
            "--job-id",
            job,
            "--socket",
            str(d.socket),
            "--",
            sys.executable,
            str(TRAINER),
        ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _latency(d: Daemon, protocol: str, job: str, repeats: int, duration_ms: int) -> list[float]:
    proc = _spawn_trainer(d, protocol, job)
    try:
        deadline = time.monotonic() + 90
        while not d.client.list_processes(job).processes:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{protocol} trainer did not register")
            time.sleep(0.1)
        time.sleep(1.0)  # let the trainer reach its loop
        out = []
        for _ in range(repeats):
            t0 = time.monotonic()
            start = d.client.start_trace(dyno_pb2.TraceRequest(job_id=job, duration_ms=duration_ms))
            (p,) = start.triggered
            path = Path(p.path)
            while not path.exists():  # the file is visible only once complete (renamed)
                if time.monotonic() - t0 > 60:
                    raise RuntimeError(f"{protocol}: no file after 60 s: {d.client.get_trace(start.trace_id)}")
                time.sleep(0.005)
            out.append(time.monotonic() - t0)
            while not d.client.get_trace(start.trace_id).finished:
                time.sleep(0.02)
        return out
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _tcp_copy(src: Path, dst: Path) -> float:
    """Plain TCP copy over loopback (1 MiB reads/sendall, receiver writes a file); seconds."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        with conn, open(src, "rb") as f:
            while chunk := f.read(1 << 20):
                conn.sendall(chunk)

    t = threading.Thread(target=serve)
    t.start()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as c, open(dst, "wb") as f:
        while data := c.recv(1 << 20):
            f.write(data)
    elapsed = time.monotonic() - t0
    t.join()
    srv.close()
    return elapsed


def _in_child(*args: str) -> float:
    """One timed transfer in a fresh interpreter (as dyno-cli runs; start-up excluded): seconds."""
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _fetch_once(port: str, trace_id: str, pid: str, out_dir: str) -> float:
    with DynoClient(f"127.0.0.1:{port}", timeout_s=10) as client:
        client.status()  # connected, as the CLI is after StartTrace / GetTrace
        t0 = time.monotonic()
        client.fetch_trace_file(trace_id, int(pid), out_dir)
        return time.monotonic() - t0


def _fetch(d: Daemon, size_mb: int, repeats: int, out_dir: Path) -> None:
    """Each repeat fetches a file the daemon has not served before (its checksum is computed while streaming)
    with a new client (a new connection), as `dyno-cli trace` does, then copies the same file over plain TCP.

    Before each timed transfer a scratch file of the same size is written and deleted in the output folder: on
    a VM, page-cache pages the guest has never touched cost a host fault each, which made whichever transfer
    wrote into fresh memory ~4x slower than one writing into pages the other had just freed. One untimed fetch
    first: a long-lived daemon's first fetch in its life also faults in fresh memory. Each fetch and each TCP
    copy runs in a fresh interpreter, timed inside it, as a `dyno-cli` fetch does (and so the fetch's
    dyno.malloc_tuning cannot touch the TCP copy's process)."""
    block = os.urandom(1 << 20)

    def warm_pages() -> None:
        scratch = out_dir / "scratch.bin"
        with open(scratch, "wb") as f:
            for _ in range(size_mb):
                f.write(block)
        scratch.unlink()

    rss_before = d.rss_kib()
    grpc_s, tcp_s, peak, size = [], [], rss_before, 0
    for r in range(-1, repeats):
        trace_id, pid = f"bench-fetch-{r}", 424242
        src = d.trace_dir / trace_id / f"{d.hostname}_{pid}.pt.trace.json.gz"
        src.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "wb") as f:
            for _ in range(size_mb):
                f.write(block)
        size = src.stat().st_size
        stop = threading.Event()
        peaks: list[int] = []

        def sample(stop: threading.Event = stop, peaks: list[int] = peaks) -> None:
            while not stop.is_set():
                peaks.append(d.rss_kib())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        warm_pages()
        sampler.start()
        elapsed = _in_child("--fetch", str(d.port), trace_id, str(pid), str(out_dir))
        stop.set()
        sampler.join()
        peak = max([peak, *peaks])
        fetched = out_dir / src.name
        assert fetched.stat().st_size == size
        fetched.unlink()
        warm_pages()
        tcp = _in_child("--tcp-copy", str(src), str(out_dir / "tcp.bin"))
        (out_dir / "tcp.bin").unlink()
        if r >= 0:  # r = -1: the untimed first fetch
            grpc_s.append(elapsed)
            tcp_s.append(tcp)
        shutil.rmtree(src.parent)
    # Where the time goes: the bare stream (received and dropped; warm connection) and the checksum alone.
    raw_s, hash_s = [], []
    src.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "wb") as f:
        for _ in range(size_mb):
            f.write(block)
    for _ in range(repeats):
        t0 = time.monotonic()
        for _chunk in d.client.stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id=trace_id, pid=pid)):
            pass
        raw_s.append(time.monotonic() - t0)
        t0 = time.monotonic()
        checksum_file(src)
        hash_s.append(time.monotonic() - t0)
    g, t = min(grpc_s), min(tcp_s)
    mb = size / 1e6

    def runs(xs: list[float]) -> str:
        return ", ".join(f"{x:.3f}" for x in xs)

    print(f"FetchTraceFile  {mb:.0f} MB, new file, new connection: best {g:.3f} s = {mb / g:.0f} MB/s ({runs(grpc_s)})")
    print(f"plain TCP copy  {mb:.0f} MB: best {t:.3f} s = {mb / t:.0f} MB/s ({runs(tcp_s)})")
    print(
        f"  bare FetchTraceFile stream (no write, no verify): best {min(raw_s):.3f} s = {mb / min(raw_s):.0f} MB/s "
        f"= {t / min(raw_s) * 100:.0f}% of TCP; xxh3-128 of the file alone: {mb / min(hash_s):.0f} MB/s"
    )
    med = statistics.median(tcp_s) / statistics.median(grpc_s) * 100
    print(f"ratio gRPC/TCP: {t / g * 100:.0f}% best vs best, {med:.0f}% median vs median (target >= 50%)")
    print(
        f"dynod RSS: {rss_before / 1024:.1f} MiB before, peak {peak / 1024:.1f} MiB while streaming "
        f"(+{(peak - rss_before) / 1024:.1f} MiB for a {mb:.0f} MB file)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration-ms", type=int, default=500)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-fetch", action="store_true")
    ap.add_argument("--tcp-copy", nargs=2, help=argparse.SUPPRESS)  # children of _in_child
    ap.add_argument("--fetch", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tcp_copy:
        print(_tcp_copy(Path(args.tcp_copy[0]), Path(args.tcp_copy[1])))
        return 0
    if args.fetch:
        print(_fetch_once(*args.fetch))
        return 0
    root = Path(tempfile.mkdtemp(prefix="dyno-bench-", dir="/tmp"))
    d = Daemon(root)
    try:
        if not args.skip_latency:
            for protocol, target in (
                ("agent", f"target <= {args.duration_ms / 1000 + 0.5:.1f} s"),
                ("kineto", "reported; bounded by kineto's 1 s poll + its own start-up"),
            ):
                lat = _latency(
                    d,
                    protocol,
                    f"bench-{protocol}" if protocol == "agent" else "777001",
                    args.repeats,
                    args.duration_ms,
                )
                print(
                    f"{protocol:6} path, {args.duration_ms} ms trace, request-to-file: median "
                    f"{statistics.median(lat):.2f} s, min {min(lat):.2f} s, max {max(lat):.2f} s ({target})"
                )
        if not args.skip_fetch:
            out = root / "fetched"
            out.mkdir()
            _fetch(d, args.size_mb, args.repeats, out)
    finally:
        d.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
