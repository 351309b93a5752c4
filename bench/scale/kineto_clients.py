"""N libkineto-like trainers: a process that forks one child per trainer (this module imports no grpc, so forking
is safe); each child binds its client socket in the kineto socket dir, sends `ctxt` once, then a `req` poll every
`poll_s` and times each reply. libkineto waits ~90 ms for one (9 tries, 10 ms apart), and sends as libkineto's
IpcFabric does: without blocking, tried again every 10 ms up to 10 times while the daemon's receive queue is full
(net.unix.max_dgram_qlen, 10 datagrams by default); a poll that could not be sent is a missed one, and the trainer
polls again at its next interval (a blocking send made a child that waited 5 s die, and the registry then dropped
it: the load got lighter exactly when dynod was slowest)."""

from __future__ import annotations

import json
import os
import random
import select
import socket
import struct
import time
import uuid
from pathlib import Path

from dyno.daemon.tracing.kineto_ipc import CLIENT_SOCKET_PREFIX, DAEMON_SOCKET_NAME, encode_message, encode_req

__all__ = ["KINETO_JOB_BASE", "kineto_clients"]

KINETO_JOB_BASE = 8_200_000
_REPLY_WAIT_S = 5.0  # how long a child waits for a late reply (it is timed, then counted as missed)
_SEND_TRIES = 10  # libkineto's IpcFabric::sync_send: 10 tries, 10 ms apart
_SEND_RETRY_S = 0.01


def kineto_clients(sock_dir: Path, count: int, poll_s: float, out_dir: Path, stop_file: Path) -> None:
    """Fork `count` children; each writes `<out_dir>/<pid>.json` ([[sent monotonic s, reply s or null], ...]) when
    `stop_file` appears. Returns when all have exited."""
    out_dir.mkdir(parents=True, exist_ok=True)
    children = []
    for i in range(count):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(sock_dir, i, poll_s, out_dir, stop_file)
            except Exception:
                code = 1
            os._exit(code)
        children.append(pid)
        time.sleep(poll_s / count)  # spread the polls over the interval, as independent trainers are
    for pid in children:
        os.waitpid(pid, 0)


def _child(sock_dir: Path, i: int, poll_s: float, out_dir: Path, stop_file: Path) -> None:
    me = os.getpid()
    daemon_addr = str(sock_dir / DAEMON_SOCKET_NAME)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = sock_dir / f"{CLIENT_SOCKET_PREFIX}{uuid.uuid4().hex}"
    s.bind(str(path))
    s.setblocking(False)  # sends as libkineto's (_send); replies awaited with a timeout (_reply)
    job = KINETO_JOB_BASE + i % 25
    samples: list[tuple[float, float | None]] = []
    try:
        while not _send(s, encode_message("ctxt", struct.pack("<iiq", i % 8, me, job)), daemon_addr):
            if stop_file.exists():
                return
        _reply(s)
        next_poll = time.monotonic() + random.uniform(0, poll_s)
        while not stop_file.exists():
            time.sleep(max(0.0, next_poll - time.monotonic()))
            next_poll += poll_s
            sent = time.monotonic()
            if not _send(s, encode_req(3, [me, os.getppid()], job), daemon_addr):
                samples.append((sent, None))
                continue
            samples.append((sent, time.monotonic() - sent if _reply(s) else None))
    finally:
        s.close()
        path.unlink(missing_ok=True)
        (out_dir / f"{me}.json").write_text(json.dumps(samples))


def _send(s: socket.socket, message: bytes, address: str) -> bool:
    for _ in range(_SEND_TRIES):
        try:
            s.sendto(message, address)
            return True
        except BlockingIOError:
            time.sleep(_SEND_RETRY_S)
    return False


def _reply(s: socket.socket) -> bool:
    if not select.select([s], [], [], _REPLY_WAIT_S)[0]:
        return False
    try:
        s.recv(65536)
    except BlockingIOError:
        return False
    return True
