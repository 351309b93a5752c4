"""What every load driver shares: the stop flag, the operation counters, the trace files trainers write."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path

import grpc

from soak.dynod import Dynod

__all__ = ["AGENT_JOBS", "FETCH_CHUNK", "KINETO_JOBS", "KINETO_JOB_BASE", "Load", "write_trace_file"]

KINETO_JOB_BASE = 7_100_000
KINETO_JOBS = 6
AGENT_JOBS = 6
TRACE_FILE_BYTES = 48 * 1024  # a fetch of it in 4 KiB chunks can be dropped mid-stream
FETCH_CHUNK = 4096


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
