"""Shared fixtures: real dynod processes on free loopback ports, each with its own sockets and dirs."""

from __future__ import annotations

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
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = REPO.parent / "shared" / "traces" / "gpu"

_READY = re.compile(r"dynod \S+ ready: grpc=(?P<host>\S+):(?P<port>\d+) metrics=(?P<metrics>\S+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def short_tmpdir(prefix: str = "dyno-") -> Path:
    """A short temp dir: Unix socket paths must stay under 108 bytes, pytest's tmp_path may not."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class Dynod:
    """One real `python -m dyno.daemon` process. `log` collects its stderr."""

    def __init__(
        self,
        extra_args: list[str] | None = None,
        *,
        gpu_backend: str = "sim",
        sim_gpus: int = 2,
        interval_s: float = 0.2,
        metrics: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.dir = short_tmpdir()
        self.port = free_port()
        self.metrics_port = free_port() if metrics else 0
        self.agent_socket = self.dir / "agent.sock"
        self.kineto_endpoint = f"dyno-test-{uuid.uuid4().hex[:12]}"
        self.trace_dir = self.dir / "traces"
        self.args = [
            "--listen",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--metrics-port",
            str(self.metrics_port),
            "--gpu-backend",
            gpu_backend,
            "--sim-gpus",
            str(sim_gpus),
            "--interval-s",
            str(interval_s),
            "--state-dir",
            str(self.dir / "state"),
            "--trace-dir",
            str(self.trace_dir),
            "--agent-socket",
            str(self.agent_socket),
            "--kineto-endpoint",
            self.kineto_endpoint,
            *(extra_args or []),
        ]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._ready = threading.Event()
        self.is_ready = False

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def log(self) -> str:
        return "".join(self._lines)

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self._lines.append(line)
            if _READY.search(line):
                self.is_ready = True
                self._ready.set()
        self._ready.set()  # stderr closed (the process is ending): wake waiters, is_ready stays as it was

    def start(self, timeout_s: float = 30.0) -> Dynod:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dyno.daemon", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        self._ready.wait(timeout_s)
        if not self.is_ready or self.proc.poll() is not None:
            code = self.proc.poll()
            self.kill()
            raise RuntimeError(f"dynod did not become ready (exit {code}); log:\n{self.log}")
        return self

    def restart(self, timeout_s: float = 30.0) -> Dynod:
        """Stop (SIGTERM) and start again on the same ports, sockets and dirs."""
        self.stop()
        self._ready = threading.Event()
        self.is_ready = False
        return self.start(timeout_s)

    def stop(self, timeout_s: float = 15.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def dynod_factory() -> Iterator:
    started: list[Dynod] = []

    def make(*args: str, start: bool = True, **kw) -> Dynod:
        d = Dynod(list(args), **kw)
        started.append(d)
        return d.start() if start else d

    yield make
    for d in started:
        d.stop()
        d.cleanup()


@pytest.fixture(scope="module")
def dynod() -> Iterator[Dynod]:
    """One simulated-GPU daemon shared by a test module (read-only tests)."""
    d = Dynod().start()
    yield d
    d.stop()
    d.cleanup()


def run_cli(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `dyno-cli` as users do (a separate process)."""
    return subprocess.run(
        [sys.executable, "-m", "dyno.client", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def wait_for(predicate, timeout_s: float = 10.0, interval_s: float = 0.05):
    """Poll until predicate() is truthy; returns its value or raises AssertionError at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
