"""Trainers on dynod's Agent socket: fake ones that end in every way a trainer does, and real ones."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from bench_common import env_without_job_ids

from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2
from soak.load import AGENT_JOBS, KINETO_JOB_BASE, KINETO_JOBS, Load, write_trace_file

__all__ = ["fake_agent", "real_agents", "real_kineto"]


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
                reg2 = _register_again(
                    load, stub, agent_pb2.RegisterRequest(pid=sleeper.pid, job_id=job + "-reused", gpu=-1)
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


def _register_again(load: Load, stub: agent_pb2_grpc.AgentStub, req: agent_pb2.RegisterRequest) -> Any:
    """Register a pid whose old Watch stream was just cancelled. dynod refuses (FAILED_PRECONDITION) while it has
    not yet seen that stream end, and the real agent retries in the background: so does this, for up to 5 s."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            return stub.Register(req, timeout=10)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.FAILED_PRECONDITION or time.monotonic() > deadline:  # type: ignore[attr-defined]
                raise
            load.count("agent register retried (old stream not yet ended)")
            time.sleep(0.05)


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
        env = env_without_job_ids()
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
        env = env_without_job_ids()
        env.update(
            KINETO_USE_DAEMON="1",
            KINETO_IPC_SOCKET_DIR=str(load.d.kineto_dir),
            KINETO_CONFIG=str(conf),
            SLURM_JOB_ID=str(KINETO_JOB_BASE + i % KINETO_JOBS),
        )
        p = subprocess.Popen([python, "-c", script], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load.count("real kineto")
        threading.Thread(target=_reap, args=(p, 8.0 if i % 2 else None), daemon=True).start()
