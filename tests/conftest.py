"""Shared fixtures: real dynod processes on free loopback ports, each with its own sockets and dirs."""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.daemon.process import DynodProcess

REPO = Path(__file__).resolve().parent.parent
# <repo root>/../shared/traces/gpu (the real GPU traces); a git worktree under /work/wt/<name> finds it one level up
SHARED_TRACES = next(
    (
        p
        for p in (REPO.parent / "shared" / "traces" / "gpu", REPO.parent.parent / "shared" / "traces" / "gpu")
        if p.is_dir()
    ),
    REPO.parent / "shared" / "traces" / "gpu",
)


# After the last test nothing times out: pytest-timeout and faulthandler_timeout (pyproject) watch tests only, and the
# interpreter's exit joins every ThreadPoolExecutor worker (grpc servers' RPC threads among them), so one stuck
# handler would hang a finished run, with no output. faulthandler's C watchdog dumps every thread and exits then.
EXIT_WATCHDOG_S = float(os.environ.get("DYNO_TEST_EXIT_WATCHDOG_S", "120"))  # the variable: for its own test


def pytest_configure(config: pytest.Config) -> None:
    # A run started in the background by a non-interactive shell (`cmd &`, nohup, some CI runners) inherits SIGINT
    # ignored, and so does every process it starts: the tests' SIGINTs to dyno-cli (a real Ctrl-C) did nothing and
    # they failed. Python's own handler is what a terminal gives; children get the default action back at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    if sys.__stderr__ is not None:
        faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True, file=sys.__stderr__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def short_tmpdir(prefix: str = "dyno-") -> Path:
    """A short temp dir: Unix socket paths must stay under 108 bytes, pytest's tmp_path may not."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class Dynod(DynodProcess):
    """A real dynod for tests: free loopback ports, its own dirs, agent socket and kineto endpoint name."""

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
        args = [
            "--listen", "127.0.0.1",
            "--port", str(self.port),
            "--metrics-port", str(self.metrics_port),
            "--gpu-backend", gpu_backend,
            "--sim-gpus", str(sim_gpus),
            "--interval-s", str(interval_s),
            "--state-dir", str(self.dir / "state"),
            "--trace-dir", str(self.trace_dir),
            "--agent-socket", str(self.agent_socket),
            # a unique abstract name, unless the test serves libkineto in a socket dir (giving both is an error)
            *([] if "--kineto-socket-dir" in (extra_args or []) else ["--kineto-endpoint", self.kineto_endpoint]),
            *(extra_args or []),
        ]  # fmt: skip
        super().__init__(args, env=env)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fake_dynod() -> Iterator[FakeServer[FakeDynoServicer]]:
    """An in-process fake dynod (FakeDynoServicer, host name "fake-PORT") on a free loopback port."""
    srv = serve(lambda port: FakeDynoServicer(f"fake-{port}"))
    yield srv
    srv.server.stop(0)


@pytest.fixture
def daemons() -> Iterator:
    """In-process fake daemons for the fetch / trace command tests (tests/unit/fetch_cmd_fakes.FakeDaemons),
    stopped after the test."""
    from fetch_cmd_fakes import FakeDaemons  # tests/unit's helper module: on sys.path for the tests that use it

    d = FakeDaemons()
    yield d
    d.stop()


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
