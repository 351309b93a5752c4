"""N agent trainers held at once: one real `sleep` process each (a live pid), Register and an open Watch stream on
a connection of its own, all on one grpc.aio event loop (a thread per stream here would measure this process)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import grpc

from dyno.v1 import agent_pb2, agent_pb2_grpc

__all__ = ["hold_agents"]

_RAMP = 32  # registrations in flight at once (an agent registers, then opens its stream)


def hold_agents(socket_path: Path, count: int, status_file: Path, stop_file: Path) -> None:
    """Register `count` agents and hold their streams until `stop_file` exists; `status_file` gets
    {"watching": n, "refused": {code: n}} every half second."""
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(count)]
    try:
        asyncio.run(_hold(socket_path, [s.pid for s in sleepers], status_file, stop_file))
    finally:
        for s in sleepers:
            s.kill()
        for s in sleepers:
            s.wait()


async def _hold(socket_path: Path, pids: list[int], status_file: Path, stop_file: Path) -> None:
    state: Counter[str] = Counter()
    ramp = asyncio.Semaphore(_RAMP)
    tasks = [asyncio.create_task(_agent(socket_path, i, pid, ramp, state)) for i, pid in enumerate(pids)]
    while not stop_file.exists():
        _write_status(status_file, state)
        await asyncio.sleep(0.5)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    _write_status(status_file, state)


def _write_status(path: Path, state: Counter[str]) -> None:
    refused = {k.split(" ", 1)[1]: v for k, v in state.items() if k.startswith("refused ")}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"watching": state["watching"], "refused": refused, "at": time.monotonic()}))
    os.replace(tmp, path)


async def _agent(socket_path: Path, i: int, pid: int, ramp: asyncio.Semaphore, state: Counter[str]) -> None:
    # a connection of its own, as each trainer process has (channels of one process share one by default)
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_http_proxy", 0)]
    async with grpc.aio.insecure_channel(f"unix:{socket_path}", options=options) as channel:
        stub = agent_pb2_grpc.AgentStub(channel)
        watching = False
        try:
            async with ramp:
                reg = await stub.Register(
                    agent_pb2.RegisterRequest(
                        pid=pid,
                        ancestry=[os.getpid()],
                        job_id=f"scale-agent-{i % 25}",
                        rank=i,
                        local_rank=i % 8,
                        world_size=len(str(i)) * 8,
                        gpu=i % 8,
                        hostname="bench",
                        cmdline=f"python train.py --rank {i} --config configs/large.yaml",
                        reports_with_session=True,
                    ),
                    timeout=30,
                )
                call = stub.Watch(agent_pb2.WatchRequest(pid=pid, session_id=reg.session_id))
                await call.read()  # the stream is up (dynod sends a keepalive first)
            state["watching"] += 1
            watching = True
            while await call.read() is not grpc.aio.EOF:  # keepalives, until cancelled
                pass
            state["refused ENDED_BY_DYNOD"] += 1  # the stream ended while the trainer lived
        except grpc.aio.AioRpcError as e:
            state[f"refused {e.code().name}"] += 1
        except Exception as e:  # a bug here must show in the figures, not end the task silently
            state[f"refused {type(e).__name__}"] += 1
        finally:
            if watching:
                state["watching"] -= 1
