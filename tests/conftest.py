"""Shared fixtures: real dynod processes on free loopback ports, each with its own sockets and dirs."""

from __future__ import annotations

import argparse
import faulthandler
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from dyno.grpc_import import import_grpc

# grpc as dynod imports it (without its fork handlers), before any module below imports it: the in-process daemons
# of the tests serve while the tests fork children (dyno.grpc_import says what the handlers did to those)
import_grpc()

from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve  # noqa: E402
from dyno.daemon.process import DynodProcess  # noqa: E402

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


# A test marked `alone` judges a real program by its share of wall time (the demo's planted antipatterns): beside
# parallel workers' tests (scripts/test.sh) it would get a fraction of a core. It runs while no other test of the run
# does: a worker holds the run's lock shared from the first to the last test of a file it runs in a row (so that
# module-scoped fixtures, trainers among them, are set up and torn down under it), an `alone` test exclusive; the
# gate, held while a lock is being taken, lets a waiting exclusive one in before new shared ones. Only xdist workers
# take part (not a pytest that a test runs in a subprocess, which would wait on its own caller).
LOCKS_ENV = "DYNO_TEST_LOCK_DIR"
LOCKS_KEY = pytest.StashKey[tuple[int, int]]()  # a worker's open lock files: the gate's and the run's
SHARED_KEY = pytest.StashKey[bool]()  # whether this worker holds the run's lock shared now
LOCK_DIR_KEY = pytest.StashKey[str]()  # the lock folder the controller made (and removes)


def _worker_locks(config: pytest.Config) -> tuple[int, int] | None:
    folder = os.environ.get(LOCKS_ENV)
    if not folder or not hasattr(config, "workerinput"):
        return None
    if LOCKS_KEY not in config.stash:
        gate, run = (os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o600) for name in ("gate", "run"))
        config.stash[LOCKS_KEY] = (gate, run)
    return config.stash[LOCKS_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    locks = _worker_locks(item.config)
    if locks is None:
        return (yield)
    gate, run = locks
    stash = item.config.stash
    alone = item.get_closest_marker("alone") is not None
    if alone and stash.get(SHARED_KEY, False):  # a file that mixes both: its shared hold ends here
        fcntl.flock(run, fcntl.LOCK_UN)
        stash[SHARED_KEY] = False
    if not stash.get(SHARED_KEY, False):
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        stash[SHARED_KEY] = not alone
    try:
        return (yield)
    finally:
        if alone:
            fcntl.flock(run, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
        elif nextitem is None or nextitem.path != item.path:  # its file's teardown ran in this item's
            fcntl.flock(run, fcntl.LOCK_UN)
            stash[SHARED_KEY] = False


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        config.stash[LOCK_DIR_KEY] = tempfile.mkdtemp(prefix="dyno-test-locks-")
        os.environ[LOCKS_ENV] = config.stash[LOCK_DIR_KEY]  # the workers started next inherit it
    # A run started in the background by a non-interactive shell (`cmd &`, nohup, some CI runners) inherits SIGINT
    # ignored, and so does every process it starts: the tests' SIGINTs to dyno-cli (a real Ctrl-C) did nothing and
    # they failed. Python's own handler is what a terminal gives; children get the default action back at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    if LOCK_DIR_KEY in config.stash:
        os.environ.pop(LOCKS_ENV, None)
        shutil.rmtree(config.stash[LOCK_DIR_KEY], ignore_errors=True)
    if sys.__stderr__ is not None:
        faulthandler.dump_traceback_later(EXIT_WATCHDOG_S, exit=True, file=sys.__stderr__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_target() -> str:
    """A loopback host:port nothing listens on: a host that is down."""
    return f"127.0.0.1:{free_port()}"


def cli_help(command: str) -> str:
    """`dyno-cli COMMAND --help`, its runs of white space folded into one space."""
    from dyno.client.cli import build_parser  # here: the CLI's parser is for the help tests alone

    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[command].format_help().split())


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

    def close(self) -> None:
        """Stop it as a service manager would, then remove its dirs."""
        self.stop()
        self.cleanup()


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
        d.close()


@pytest.fixture(scope="module")
def dynod() -> Iterator[Dynod]:
    """One simulated-GPU daemon shared by a test module (read-only tests)."""
    d = Dynod().start()
    yield d
    d.close()


def run_cli(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `dyno-cli` as users do (a separate process)."""
    return subprocess.run(
        [sys.executable, "-m", "dyno.client", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def start_cli(*args: str, stderr: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    """Start `dyno-cli` as users do (a separate process), its stdout (and stderr, unless told) piped as text."""
    return subprocess.Popen(
        [sys.executable, "-m", "dyno.client", *args], stdout=subprocess.PIPE, stderr=stderr, text=True
    )


def ctrl_c(cli: subprocess.Popen[str], when: Callable[[], object], timeout_s: float = 30.0) -> tuple[str, str]:
    """Once `when()` returns, Ctrl-C (SIGINT) a running `dyno-cli` and wait for it to exit: its stdout and stderr.
    It is killed when `when` raises or it outlives `timeout_s`."""
    try:
        when()
        cli.send_signal(signal.SIGINT)
        return cli.communicate(timeout=timeout_s)
    finally:
        if cli.poll() is None:
            cli.kill()


def trace_unknown_job(out: Path, *hosts: str) -> subprocess.CompletedProcess:
    """`dyno-cli trace` of a job no daemon has ("no-such-job") on `hosts` (its host options), into `out`; checks what
    every daemon answers: exit 1, naming the job asked for."""
    res = run_cli("trace", *hosts, "--job-id", "no-such-job", "--duration-ms", "100", "--output-dir", str(out))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "no process of job 'no-such-job'" in res.stderr
    return res


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
