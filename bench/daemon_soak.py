#!/usr/bin/env python3
"""Daemon soak: weeks of a busy host's traffic, compressed into minutes, against one real dynod; does anything grow?

Starts `python -m dyno.daemon` with a temp TOML config (sim GPU backend, loopback, free ports, its own agent socket,
kineto socket dir, state and trace dirs, short trace retention) and drives it with, at once:

- fake agent trainers (one real short-lived `sleep` process each, for a live pid), speaking the Agent service's
  real wire protocol on the Unix socket: Register, a Watch stream, trace files written and ReportTrace; they end
  in every way a trainer does: a clean stream cancel, the process killed before its channel closes, a pid that
  registers again as another job while its old stream is still open (pid reuse before garbage collection),
  registrations that never open a Watch stream, and a death mid-trace that leaves a `.tmp` file;
- fake libkineto trainers: a fleet process forks short-lived children, each binding its own
  `dynoconfigclient<uuid>` socket in the kineto socket dir (never unlinked, as libkineto does), sending ctxt and
  req polls with the kernel's credentials, writing the trace file a config asks for (or crashing mid-write, or
  exiting before it writes), and exiting (a kineto pid is reused only when the host's pid space wraps: pid_max);
- a handful of real ones: `dyno.client.agent` processes and (unless --quick) torch processes with
  KINETO_USE_DAEMON=1;
- a tracer: StartTrace for registered jobs, GetTrace polls until finished, FetchTraceFile of the done files
  (some dropped after the first chunk), CancelTrace, and retention deleting the old trace folders;
- CLI-style unary calls (GetStatus, GetVersion, ListProcesses, GetMetrics, health, unknown trace ids; many on a
  fresh channel, as each dyno-cli run opens one), StreamMetrics sessions dropped mid-stream;
- /metrics scrapes, and connections that send half a request and go away.

dynod's RSS, open fds, threads, registered processes, trace folders, kineto socket files and the dyno_* gauges are
sampled every few seconds; the table shows them at start, after warm-up, in the middle and at the end, with the
growth per 1000 operations from warm-up to the end and over the second half (a leak keeps growing in the second
half; a cache or pool filling up does not). Prints figures; asserts nothing.

`--objects` runs dynod's own main() under a small wrapper that counts its live objects by type on SIGUSR1 and
prints the types that grew (a leak of a few hundred bytes per trainer is lost in RSS noise; a growing count is not).
`--series-churn HOURS` measures something else, in-process: the history's series table on a node whose network
interfaces come and go under new names.

    python bench/daemon_soak.py [--minutes 3] [--quick] [--objects] [--keep]
    python bench/daemon_soak.py --series-churn 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dyno.daemon.kineto_ipc import CLIENT_SOCKET_PREFIX, DAEMON_SOCKET_NAME, encode_message, encode_req
from dyno.job_ids import JOB_ID_VARIABLES
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2, dyno_pb2_grpc

KINETO_JOB_BASE = 7_100_000
KINETO_JOBS = 6
AGENT_JOBS = 6
TRACE_FILE_BYTES = 48 * 1024  # a fetch of it in 4 KiB chunks can be dropped mid-stream
FETCH_CHUNK = 4096


# -- dynod ----------------------------------------------------------------------------------------------------


class Dynod:
    """`python -m dyno.daemon --config <tmp>/dynod.toml` on free loopback ports, with everything under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.agent_socket = root / "agent.sock"
        self.kineto_dir = root / "k"
        self.trace_dir = root / "traces"
        self.config = root / "dynod.toml"
        self.config.write_text(
            "\n".join(
                [
                    'listen = "127.0.0.1"',
                    "port = 0",
                    f"metrics_port = {_free_port()}",
                    'gpu_backend = "sim"',
                    "sim_gpus = 8",
                    "interval_s = 0.5",
                    "history_s = 60",
                    f'state_dir = "{root / "state"}"',
                    f'trace_dir = "{self.trace_dir}"',
                    f'agent_socket = "{self.agent_socket}"',
                    f'kineto_socket_dir = "{self.kineto_dir}"',
                    "trace_retention_s = 20",  # retention passes (every 30 s) delete most folders of a run
                    f"trace_retention_bytes = {8 * 1024 * 1024}",
                    'log_level = "warning"',
                ]
            )
            + "\n"
        )
        self.log = root / "dynod.log"
        self.objects_file = root / "objects.json"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.metrics_port = 0

    def start(self, objects: bool = False) -> None:
        """`objects`: dynod's own main() under a wrapper that counts its live objects by type on SIGUSR1."""
        env = {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}
        entry = ["-c", OBJECT_COUNTER, str(self.objects_file)] if objects else ["-m", "dyno.daemon"]
        self.proc = subprocess.Popen(
            [sys.executable, *entry, "--config", str(self.config), "--log-level", "info"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stderr is not None
        log = open(self.log, "w")  # noqa: SIM115 (closed by the drain thread)
        for line in self.proc.stderr:
            log.write(line)
            if " ready: " in line:
                # "dynod X ready: grpc=127.0.0.1:PORT metrics=http://127.0.0.1:PORT/metrics pid=N"
                words = dict(w.split("=", 1) for w in line.split() if "=" in w)
                self.port = int(words["grpc"].rsplit(":", 1)[1])
                self.metrics_port = int(words["metrics"].rsplit(":", 1)[1].split("/")[0])
                break
        else:
            raise SystemExit(f"dynod did not start; see {self.log}:\n{self.log.read_text()[-3000:]}")

        def drain() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            with log:
                for line in self.proc.stderr:
                    log.write(line)

        threading.Thread(target=drain, daemon=True).start()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def objects(self) -> Counter[str]:
        """dynod's live (gc-tracked) objects by type, as of now (started with objects=True)."""
        self.objects_file.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        for _ in range(200):
            if self.objects_file.exists():
                return Counter(json.loads(self.objects_file.read_text()))
            time.sleep(0.05)
        return Counter()


# What `--objects` runs instead of `python -m dyno.daemon`: the same main(), and on SIGUSR1 a count of every
# gc-tracked object by type (after a full collection) written to argv[1]. A leak of a few hundred bytes per trainer
# is lost in RSS noise over a few thousand operations; a type whose count keeps growing is not.
OBJECT_COUNTER = """
import collections, gc, json, os, signal, sys, threading
out = sys.argv.pop(1)
def count():
    gc.collect()
    c = collections.Counter(str(type(o)) for o in gc.get_objects())
    with open(out + ".tmp", "w") as f:
        json.dump(c, f)
    os.replace(out + ".tmp", out)
signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=count).start())
from dyno.daemon.main import main
sys.exit(main(sys.argv[1:]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- what is measured -----------------------------------------------------------------------------------------


@dataclass
class Figures:
    at_s: float
    ops: int
    values: dict[str, float] = field(default_factory=dict)


def _proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(rest.split()[0])
    return out


def _gauges(metrics_port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("dyno_") and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in WATCHED_GAUGES:
                out[WATCHED_GAUGES[name]] = float(line.rsplit(" ", 1)[1])
    return out


WATCHED_GAUGES = {
    "dyno_registered_processes": "registered (gauge)",
    "dyno_active_traces": "active traces",
    "dyno_trace_dir_bytes": "trace dir KiB",
}


def measure(d: Dynod, started: float, ops: int) -> Figures:
    f = Figures(time.monotonic() - started, ops)
    st = _proc_status(d.pid)
    f.values["rss KiB"] = st["VmRSS"]
    f.values["threads"] = st["Threads"]
    f.values["open fds"] = len(os.listdir(f"/proc/{d.pid}/fd"))
    try:
        f.values.update(_gauges(d.metrics_port))
    except OSError:
        pass
    if "trace dir KiB" in f.values:
        f.values["trace dir KiB"] //= 1024
    f.values["trace folders"] = sum(1 for p in d.trace_dir.iterdir() if p.is_dir())
    f.values["kineto dir files"] = sum(1 for _ in d.kineto_dir.iterdir())
    f.values["tmp files"] = sum(1 for p in d.trace_dir.rglob("*.tmp"))
    return f


# -- load -----------------------------------------------------------------------------------------------------


class Load:
    """Every driver thread shares the stop flag and the operation counter."""

    def __init__(self, d: Dynod) -> None:
        self.d = d
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ops: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.kineto_ops_file = d.root / "kineto-ops"
        self.trace_ids: list[str] = []
        self.orphans: list[tuple[grpc.Channel, grpc.Future]] = []  # connections of exited trainers, kept open

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.ops[what] += n

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] += 1

    def total(self) -> int:
        with self.lock:
            mine = sum(self.ops.values())
        try:
            return mine + int(self.kineto_ops_file.read_text() or 0)
        except (OSError, ValueError):
            return mine


def write_trace_file(path: Path, pid: int) -> int:
    """A small valid Chrome trace, written as trainers do (a temp name, then the final one)."""
    events = [{"ph": "X", "name": f"op{i}", "ts": i * 10, "dur": 5, "pid": pid, "tid": 1} for i in range(400)]
    body = json.dumps({"traceEvents": events, "pad": "x" * TRACE_FILE_BYTES}).encode()
    tmp = Path(str(path) + ".tmp")
    tmp.write_bytes(body)
    os.replace(tmp, path)
    return len(body)


def traces_known(d: Dynod, trace_ids: list[str]) -> int:
    with grpc.insecure_channel(d.target) as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        known = 0
        for tid in trace_ids:
            try:
                stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=tid), timeout=10)
                known += 1
            except grpc.RpcError:
                pass
    return known


def fake_agent(load: Load, worker: int, rng: random.Random) -> None:
    """One trainer after another: a real pid (a `sleep`), Register, Watch, traces, and an ending of some kind."""
    target = f"unix:{load.d.agent_socket}"
    while not load.stop.is_set():
        sleeper = subprocess.Popen(["sleep", "300"])
        job = f"soak-agent-{rng.randrange(AGENT_JOBS)}"
        ending = rng.choices(["cancel", "kill", "reuse", "no-watch", "orphan"], weights=[5, 3, 1, 1, 1])[0]
        # a connection of its own, as each trainer process has (channels of one process share one by default)
        channel = grpc.insecure_channel(
            target, options=[("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1)]
        )
        streams: list[grpc.Future] = []
        try:
            stub = agent_pb2_grpc.AgentStub(channel)
            reg = stub.Register(
                agent_pb2.RegisterRequest(
                    pid=sleeper.pid,
                    ancestry=[os.getpid()],
                    job_id=job,
                    rank=worker,
                    local_rank=worker % 8,
                    world_size=16,
                    gpu=worker % 8,
                    hostname=socket.gethostname(),
                    cmdline=f"python train.py --worker {worker}",
                ),
                timeout=10,
            )
            load.count("agent register")
            if ending == "no-watch":
                time.sleep(rng.uniform(0.05, 0.3))
                continue
            if ending == "orphan":  # the trainer exits, a child it forked still holds its connection (and stream)
                stream = stub.Watch(agent_pb2.WatchRequest(pid=sleeper.pid, session_id=reg.session_id))
                next(stream)  # the stream is up
                with load.lock:
                    load.orphans.append((channel, stream))
                load.count("agent orphaned stream")
                time.sleep(rng.uniform(0.1, 1.0))
                continue
            lifetime = rng.uniform(0.3, 2.5)
            _watch(load, stub, sleeper.pid, reg.session_id, lifetime, streams)
            if ending == "reuse":  # the same pid registers as another job before its old stream ended
                reg2 = stub.Register(
                    agent_pb2.RegisterRequest(pid=sleeper.pid, job_id=job + "-reused", gpu=-1), timeout=10
                )
                load.count("agent register")
                _watch(load, stub, sleeper.pid, reg2.session_id, rng.uniform(0.1, 0.5), streams)
        except grpc.RpcError as e:
            load.error(f"agent {e.code().name}")  # type: ignore[attr-defined]
        finally:
            if ending == "kill":  # the process dies first; its connection goes with it
                sleeper.kill()
                channel.close()
            elif ending == "orphan":
                sleeper.kill()  # the connection stays open (closed at the end of the run)
            else:
                for s in streams:
                    s.cancel()
                channel.close()
                sleeper.kill()
            sleeper.wait()


def _watch(load: Load, stub: agent_pb2_grpc.AgentStub, pid: int, session: str, lifetime: float, streams: list) -> None:
    """Hold a Watch stream for `lifetime` s, doing the traces it brings; the stream stays open (in `streams`) when
    the lifetime ends, for the caller's ending."""
    stream = stub.Watch(agent_pb2.WatchRequest(pid=pid, session_id=session))
    streams.append(stream)
    timer = threading.Timer(lifetime, stream.cancel)
    timer.start()
    try:
        for cmd in stream:
            if cmd.HasField("trace"):
                cfg = cmd.trace
                stub.ReportTrace(
                    agent_pb2.ReportTraceRequest(pid=pid, trace_id=cfg.trace_id, state=dyno_pb2.TRACE_STATE_RUNNING),
                    timeout=10,
                )
                if random.random() < 0.1:  # dies mid-write: a .tmp is left, the stream ends
                    Path(cfg.output_path + ".tmp").write_bytes(b'{"traceEvents": [')
                    stream.cancel()
                    load.count("agent died mid-trace")
                    break
                try:
                    size = write_trace_file(Path(cfg.output_path), pid)
                except OSError:  # its lifetime ended mid-write: the stream closed, dynod removed the .tmp
                    load.count("agent trace cut by its exit")
                    break
                stub.ReportTrace(
                    agent_pb2.ReportTraceRequest(
                        pid=pid,
                        trace_id=cfg.trace_id,
                        state=dyno_pb2.TRACE_STATE_DONE,
                        path=cfg.output_path,
                        size_bytes=size,
                    ),
                    timeout=10,
                )
                load.count("agent trace")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
            raise
    finally:
        timer.cancel()


def real_agents(load: Load, every_s: float, python: str) -> None:
    """The real dyno.client.agent in real processes, one every `every_s`, each living a few seconds."""
    script = "import sys, time\nfrom dyno.client import agent\nagent.start(sys.argv[1], sys.argv[2])\ntime.sleep(4)\n"
    n = 0
    while not load.stop.wait(every_s if n else 1.0):
        n += 1
        env = {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}
        p = subprocess.Popen(
            [python, "-c", script, f"soak-real-agent-{n}", str(load.d.agent_socket)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        load.count("real agent")
        threading.Thread(target=_reap, args=(p, 2.0 + (n % 3) if n % 2 else None), daemon=True).start()


def _reap(p: subprocess.Popen, kill_after_s: float | None) -> None:
    """Wait for a real trainer; SIGKILL it first after `kill_after_s` (its Watch stream or socket dies unannounced)."""
    if kill_after_s is not None:
        try:
            p.wait(kill_after_s)
        except subprocess.TimeoutExpired:
            p.kill()
    p.wait()


def real_kineto(load: Load, count: int, python: str) -> None:
    """Unmodified torch with KINETO_USE_DAEMON=1 against the endpoint: `count` of them over the run."""
    conf = load.d.root / "kineto.conf"
    conf.write_text("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
    script = "import time, torch\nx = torch.ones(64, 64)\nend = time.time() + 15\nwhile time.time() < end:\n"
    script += "    x = (x @ x).clamp(max=1.0)\n    time.sleep(0.01)\n"
    for i in range(count):
        if load.stop.wait(5.0 if i == 0 else 40.0):
            return
        env = {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}
        env.update(
            KINETO_USE_DAEMON="1",
            KINETO_IPC_SOCKET_DIR=str(load.d.kineto_dir),
            KINETO_CONFIG=str(conf),
            SLURM_JOB_ID=str(KINETO_JOB_BASE + i % KINETO_JOBS),
        )
        p = subprocess.Popen([python, "-c", script], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load.count("real kineto")
        threading.Thread(target=_reap, args=(p, 8.0 if i % 2 else None), daemon=True).start()


def tracer(load: Load, rng: random.Random) -> None:
    """StartTrace for registered jobs, GetTrace until finished, FetchTraceFile (some dropped mid-stream), cancels."""
    channel = grpc.insecure_channel(load.d.target)
    stub = dyno_pb2_grpc.DynoStub(channel)
    while not load.stop.wait(rng.uniform(0.1, 0.4)):
        try:
            jobs = {p.job_id for p in stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=10).processes}
            jobs = {j for j in jobs if j.startswith("soak-agent-") or j.startswith(str(KINETO_JOB_BASE)[:4])}
            if not jobs:
                continue
            job = rng.choice(sorted(jobs))
            started = stub.StartTrace(
                dyno_pb2.TraceRequest(job_id=job, duration_ms=100, process_limit=rng.choice([0, 1, 2])), timeout=10
            )
            load.count("StartTrace")
            if started.triggered:
                with load.lock:
                    load.trace_ids.append(started.trace_id)
            if not started.triggered:
                continue
            if rng.random() < 0.1:
                stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id=started.trace_id), timeout=10)
                load.count("CancelTrace")
            deadline = time.monotonic() + 8
            status = None
            while time.monotonic() < deadline and not load.stop.is_set():
                status = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), timeout=10)
                load.count("GetTrace")
                if status.finished:
                    break
                time.sleep(0.2)
            if status is None:
                continue
            for p in status.processes:
                if p.state != dyno_pb2.TRACE_STATE_DONE:
                    continue
                chunks = stub.FetchTraceFile(
                    dyno_pb2.FetchTraceFileRequest(trace_id=started.trace_id, pid=p.pid, chunk_size=FETCH_CHUNK),
                    timeout=20,
                )
                drop = rng.random() < 0.3
                for _ in chunks:
                    if drop:
                        chunks.cancel()  # a client that goes away mid-file
                        break
                load.count("FetchTraceFile")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                load.error(f"tracer {e.code().name}")  # type: ignore[attr-defined]
    channel.close()


def cli(load: Load, rng: random.Random) -> None:
    """dyno-cli-like unary calls: many on a fresh channel each (a CLI run), the rest on one kept channel."""
    kept = grpc.insecure_channel(load.d.target)
    while not load.stop.is_set():
        fresh = rng.random() < 0.3
        channel = grpc.insecure_channel(load.d.target) if fresh else kept
        stub = dyno_pb2_grpc.DynoStub(channel)
        what = rng.choice(["status", "version", "ps", "metrics", "health", "unknown trace", "stream"])
        try:
            if what == "status":
                stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=10)
            elif what == "version":
                stub.GetVersion(dyno_pb2.GetVersionRequest(), timeout=10)
            elif what == "ps":
                stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=10)
            elif what == "metrics":
                stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=rng.choice([1, 10, 60])), timeout=10)
            elif what == "health":
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            elif what == "unknown trace":
                tid = f"soak-{uuid.uuid4().hex[:12]}"
                try:
                    stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=tid), timeout=10)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                        raise
            else:  # a `metrics --watch` view closed after a sample or two
                stream = stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=10)
                for i, _ in enumerate(stream):
                    if i >= rng.randrange(2):
                        stream.cancel()
                        break
            load.count(f"cli {what}")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                load.error(f"cli {what} {e.code().name}")  # type: ignore[attr-defined]
        finally:
            if fresh:
                channel.close()
        time.sleep(rng.uniform(0.0, 0.03))
    kept.close()


def scraper(load: Load, rng: random.Random) -> None:
    url = f"http://127.0.0.1:{load.d.metrics_port}/metrics"
    while not load.stop.wait(rng.uniform(0.05, 0.2)):
        try:
            if rng.random() < 0.15:  # half a request, then gone
                with socket.create_connection(("127.0.0.1", load.d.metrics_port), timeout=5) as s:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                load.count("scrape dropped")
            else:
                urllib.request.urlopen(url, timeout=10).read()
                load.count("scrape")
        except OSError:
            load.error("scrape")


# -- the kineto fleet (a process of its own: it forks) ---------------------------------------------------------


def kineto_fleet(sock_dir: Path, ops_file: Path, concurrency: int, stop_file: Path) -> None:
    """Forks libkineto-like trainers until `stop_file` exists; writes its operation count to `ops_file`."""
    daemon_addr = str(sock_dir / DAEMON_SOCKET_NAME)
    rng = random.Random(7)
    children: set[int] = set()
    done = 0
    last_write = 0.0
    while not stop_file.exists():
        while len(children) < concurrency:
            job = KINETO_JOB_BASE + rng.randrange(KINETO_JOBS)
            polls = rng.randint(2, 8)
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    _kineto_child(daemon_addr, sock_dir, job, polls, rng.random())
                except Exception:
                    code = 1
                os._exit(code)
            children.add(pid)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid:
            children.discard(pid)
            done += 1
        else:
            time.sleep(0.01)
        if time.monotonic() - last_write > 0.5:
            ops_file.write_text(str(done))
            last_write = time.monotonic()
    for pid in children:
        os.waitpid(pid, 0)
        done += 1
    ops_file.write_text(str(done))


def _kineto_child(daemon_addr: str, sock_dir: Path, job: int, polls: int, luck: float) -> None:
    """libkineto's side, byte for byte: a client socket of its own, ctxt once, then req polls every 0.25 s."""
    me = os.getpid()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(sock_dir / f"{CLIENT_SOCKET_PREFIX}{uuid.uuid4().hex}"))
    s.settimeout(0.5)
    s.sendto(encode_message("ctxt", struct.pack("<iiq", me % 8, me, job)), daemon_addr)
    try:
        s.recv(4096)
    except TimeoutError:
        pass
    for _ in range(polls):
        s.sendto(encode_req(3, [me, os.getppid()], job), daemon_addr)
        try:
            reply = s.recv(65536)
        except TimeoutError:
            reply = b""
        config = reply[40:].decode(errors="replace")
        if "ACTIVITIES_LOG_FILE=" in config:
            log_file = next(line.split("=", 1)[1] for line in config.splitlines() if line.startswith("ACTIVITIES_"))
            out = log_file.replace(".pt.trace.json", f"_{me}.pt.trace.json")
            if luck < 0.7:
                time.sleep(0.12)
                write_trace_file(Path(out), me)
            elif luck < 0.8:  # crashes while writing: its .tmp stays behind
                Path(out + ".tmp").write_bytes(b'{"traceEvents": [')
                os._exit(1)
            # else: exits before it writes (the trace fails: process exited)
        time.sleep(0.25)
    if luck > 0.9:  # most leave their socket file behind, as libkineto does; a few clean up
        os.unlink(s.getsockname())
    s.close()


# -- series churn (in-process: network interfaces coming and going) --------------------------------------------


def series_churn(hours: float, pods_at_once: int = 4, pod_life_s: int = 600) -> None:
    """dynod's host sampler and history over `hours` of 1 s ticks (simulated clock, fake /proc) on a node whose
    pods each get a host-side interface of a new name (AWS VPC CNI's `eni<hash>`, GKE's `gke<hash>`: not among
    the virtual prefixes the sampler skips). Prints the history's series table and the memory it and the GetMetrics
    encoder hold, every simulated hour. The history keeps 1 h of samples: a series older than that is in none."""
    import tracemalloc

    from dyno.daemon.history import History, Sample
    from dyno.daemon.samplers.host import HostSampler
    from dyno.daemon.wire import StoredEncoder

    root = Path(tempfile.mkdtemp(prefix="dyno-churn-"))
    (root / "net").mkdir()
    (root / "stat").write_text("cpu  1 0 1 100 0 0 0 0 0 0\ncpu0 1 0 1 100 0 0 0 0 0 0\n")
    (root / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
    (root / "diskstats").write_text("")
    (root / "loadavg").write_text("0.1 0.1 0.1 1/100 1\n")
    (root / "uptime").write_text("100.0 100.0\n")
    head = "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes ...\n"
    now = [0.0]
    sampler = HostSampler(root, clock=lambda: now[0])
    history = History(3600, clock=lambda: now[0])
    encoder = StoredEncoder(history.series)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    print(f"series churn: {pods_at_once} pods at once, each {pod_life_s} s with a new interface name, 1 s ticks")
    print(f"{'hours':>6}{'pods':>8}{'series':>9}{'in ring':>9}{'KiB held':>10}")
    pod_every = pod_life_s // pods_at_once
    for t in range(int(hours * 3600) + 1):
        now[0] = float(t)
        first = max(0, t // pod_every - pods_at_once + 1)
        names = ["eth0"] + [f"eni{uuid.UUID(int=i).hex[-11:]}" for i in range(first, t // pod_every + 1)]
        rows = "".join(f"{n}: {t * 1000} {t} 0 0 0 0 0 0 {t * 900} {t} 0 0 0 0 0 0\n" for n in names)
        (root / "net" / "dev").write_text(head + rows)
        history.append(Sample(t * 1000, tuple(sampler.sample())))
        if t % 600 == 0:
            encoder.response_bytes(history.stored(limit=60), "h")  # a GetMetrics now and then
        if t % 3600 == 0:
            live = len({i for st in history.stored() for i in st.ids})
            held = (tracemalloc.get_traced_memory()[0] - base) // 1024
            print(f"{t / 3600:>6.0f}{t // pod_every:>8}{len(history.series):>9}{live:>9}{held:>10}")
    tracemalloc.stop()
    shutil.rmtree(root, ignore_errors=True)


# -- the run --------------------------------------------------------------------------------------------------


def table(samples: list[Figures], warm: Figures, after: Figures) -> str:
    """`samples` up to the end (8 s after the load stopped); `after`: once the orphaned connections were closed."""
    mid = min(samples, key=lambda f: abs(f.at_s - (warm.at_s + samples[-1].at_s) / 2))
    end = samples[-1]
    names = list(dict.fromkeys(k for f in samples for k in f.values))
    cols = ("start", "warm", "middle", "end", "max", "/1k ops", "/1k 2nd½", "closed")
    lines = [
        f"{'':<20}" + "".join(f"{c:>10}" for c in cols),
        f"{'t (s)':<20}" + "".join(f"{f.at_s:>10.0f}" for f in (samples[0], warm, mid, end)) + f"{'':>30}"
        f"{after.at_s:>10.0f}",
        f"{'operations':<20}" + "".join(f"{f.ops:>10}" for f in (samples[0], warm, mid, end)),
    ]
    for n in names:

        def v(f: Figures, n: str = n) -> float:
            return f.values.get(n, float("nan"))

        per_k = (v(end) - v(warm)) / max(1, end.ops - warm.ops) * 1000
        per_k2 = (v(end) - v(mid)) / max(1, end.ops - mid.ops) * 1000
        peak = max(v(f) for f in samples)
        lines.append(
            f"{n:<20}{v(samples[0]):>10.0f}{v(warm):>10.0f}{v(mid):>10.0f}{v(end):>10.0f}{peak:>10.0f}"
            f"{per_k:>+10.2f}{per_k2:>+10.2f}{v(after):>10.0f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=3.0, help="how long to drive dynod (default 3)")
    ap.add_argument("--quick", action="store_true", help="a 40 s run with less load (a smoke test of the bench)")
    ap.add_argument("--agents", type=int, default=6, help="fake agent trainers at once (default 6)")
    ap.add_argument("--kineto", type=int, default=8, help="fake libkineto trainers at once (default 8)")
    ap.add_argument("--sample-s", type=float, default=3.0, help="seconds between samples of dynod (default 3)")
    ap.add_argument(
        "--objects",
        action="store_true",
        help="run dynod's main() under a wrapper that counts its objects by type, and show the types that grew",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (dynod's log) after the run")
    ap.add_argument(
        "--series-churn",
        type=float,
        metavar="HOURS",
        help="instead of the soak: the history's series table over HOURS of interfaces coming and going (in-process)",
    )
    ap.add_argument("--kineto-fleet", nargs=4, metavar=("DIR", "OPS", "N", "STOP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.kineto_fleet:
        sock_dir, ops, n, stop = args.kineto_fleet
        kineto_fleet(Path(sock_dir), Path(ops), int(n), Path(stop))
        return 0
    if args.series_churn:
        series_churn(args.series_churn)
        return 0
    seconds = 40.0 if args.quick else args.minutes * 60
    agents, kineto = (3, 4) if args.quick else (args.agents, args.kineto)

    root = Path(tempfile.mkdtemp(prefix="dyno-soak-", dir="/tmp"))
    d = Dynod(root)
    d.start(objects=args.objects)
    load = Load(d)
    stop_file = root / "stop"
    fleet = subprocess.Popen(
        [sys.executable, __file__, "--kineto-fleet", str(d.kineto_dir), str(load.kineto_ops_file), str(kineto)]
        + [str(stop_file)],
        env={k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES},
    )
    started = time.monotonic()
    samples = [measure(d, started, 0)]
    threads = [
        threading.Thread(target=fake_agent, args=(load, i, random.Random(i)), daemon=True) for i in range(agents)
    ]
    threads += [
        threading.Thread(target=tracer, args=(load, random.Random(100)), daemon=True),
        threading.Thread(target=cli, args=(load, random.Random(101)), daemon=True),
        threading.Thread(target=cli, args=(load, random.Random(102)), daemon=True),
        threading.Thread(target=scraper, args=(load, random.Random(103)), daemon=True),
        threading.Thread(target=real_agents, args=(load, 10.0 if args.quick else 6.0, sys.executable), daemon=True),
    ]
    if not args.quick:
        threads.append(threading.Thread(target=real_kineto, args=(load, 3, sys.executable), daemon=True))
    for t in threads:
        t.start()
    print(f"dynod pid {d.pid} grpc {d.target} metrics :{d.metrics_port}; driving it for {seconds:.0f} s", flush=True)
    warm_at = started + min(30.0, seconds * 0.15)
    warm: Figures | None = None
    objects_warm: Counter[str] = Counter()
    next_report = started + 30
    while time.monotonic() < started + seconds:
        time.sleep(args.sample_s)
        samples.append(measure(d, started, load.total()))
        if warm is None and time.monotonic() >= warm_at:
            warm = samples[-1]
            objects_warm = d.objects() if args.objects else Counter()
        if time.monotonic() >= next_report:
            f = samples[-1]
            print(f"  {f.at_s:5.0f} s  {f.ops:7d} ops  " + "  ".join(f"{k}={v:.0f}" for k, v in f.values.items()))
            next_report += 30
    load.stop.set()
    stop_file.touch()
    fleet.wait(60)
    for t in threads:
        t.join(15)
    time.sleep(8)  # a housekeeping pass (every 5 s when idle) drops the last exited trainers
    samples.append(measure(d, started, load.total()))  # after the load: what stays (orphaned streams still open)
    objects_end = d.objects() if args.objects else Counter()
    for channel, stream in load.orphans:
        stream.cancel()
        channel.close()
    time.sleep(2)
    samples.append(measure(d, started, load.total()))  # the orphaned connections closed
    assert warm is not None
    print()
    print(f"dynod soak: {seconds:.0f} s, {samples[-1].ops} operations ({(samples[-1].ops) / seconds:.0f}/s)")
    with load.lock:
        ops = dict(load.ops)
        errors = dict(load.errors)
    try:
        ops["kineto trainer"] = int(load.kineto_ops_file.read_text())
    except (OSError, ValueError):
        pass
    print("operations: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    print("errors: " + (", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"))
    print()
    print(table(samples[:-1], warm, samples[-1]))
    if args.objects:
        grown = (objects_end - objects_warm).most_common(12)
        ops = max(1, samples[-1].ops - warm.ops)
        print(f"dynod's objects by type, warm-up -> end ({sum(objects_end.values())} in all at the end):")
        for name, n in grown:
            print(f"  {name:<60}{objects_warm[name]:>8} -> {objects_end[name]:>8}  {n * 1000 / ops:+8.2f}/1k ops")
        if not grown:
            print("  no type grew")
    known = traces_known(d, load.trace_ids)
    print(
        f"trace table: {known} of {len(load.trace_ids)} started trace ids still answer GetTrace "
        f"(retention forgets the others with their folders); {samples[-1].values['trace folders']:.0f} folders on disk"
    )
    rc = d.stop()
    text = d.log.read_text()
    print()
    print(
        f"dynod exit {rc}; log lines: {text.count(chr(10))}, WARNING {text.count(' WARNING ')}, "
        f"ERROR {text.count(' ERROR ')}, tracebacks {text.count('Traceback')}"
    )
    if args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
