"""Fake libkineto trainers: a process of its own (it forks) whose children speak libkineto's IPC."""

from __future__ import annotations

import os
import random
import socket
import struct
import time
import uuid
from pathlib import Path

from dyno.daemon.tracing.kineto_ipc import CLIENT_SOCKET_PREFIX, DAEMON_SOCKET_NAME, encode_message, encode_req
from soak.load import KINETO_JOB_BASE, KINETO_JOBS, write_trace_file

__all__ = ["kineto_fleet"]


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
