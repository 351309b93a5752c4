"""dynod start-up failures of its local endpoints (agent socket, kineto socket dir) found by hand: each must be
one line naming the path and saying why, exit 1, no traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Dynod, short_tmpdir

pytestmark = pytest.mark.integration


def _dynod(*args: str) -> subprocess.CompletedProcess[str]:
    base = ["--port", "0", "--metrics-port", "0", "--gpu-backend", "none"]
    if "--kineto-socket-dir" not in args:  # giving both is a configuration error
        base += ["--kineto-endpoint", "off"]
    return subprocess.run(
        [sys.executable, "-m", "dyno.daemon", *base, *args], capture_output=True, text=True, timeout=60
    )


def _error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("dynod: error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = short_tmpdir("dyno-e2-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_agent_socket_path_too_long_for_a_unix_socket(workdir: Path) -> None:
    sock = workdir / ("a" * 120) / "agent.sock"
    line = _error_line(_dynod("--state-dir", str(workdir / "state"), "--trace-dir", str(workdir / "t"),
                              "--agent-socket", str(sock)))  # fmt: skip
    assert str(sock) in line and "too long" in line


def test_agent_socket_under_a_regular_file(workdir: Path) -> None:
    blocker = workdir / "not-a-dir"
    blocker.write_text("x")
    line = _error_line(_dynod("--state-dir", str(workdir / "state"), "--trace-dir", str(workdir / "t"),
                              "--agent-socket", str(blocker / "agent.sock")))  # fmt: skip
    assert str(blocker) in line and "agent socket" in line


def test_second_daemon_on_the_same_kineto_socket_dir_is_refused(workdir: Path) -> None:
    """Two daemons given one --kineto-socket-dir: the second must fail as with one abstract name, not unlink the
    first one's live socket (whose trainers would then reach nobody)."""
    first = Dynod(["--kineto-socket-dir", str(workdir / "kineto")]).start()
    try:
        sock = workdir / "kineto" / "dynolog"
        assert sock.is_socket()
        line = _error_line(_dynod("--state-dir", str(workdir / "state"), "--trace-dir", str(workdir / "t"),
                                  "--agent-socket", str(workdir / "second.sock"),
                                  "--kineto-socket-dir", str(workdir / "kineto")))  # fmt: skip
        assert f"cannot bind kineto endpoint {sock}" in line and "in use" in line
        assert sock.is_socket()  # the first daemon's endpoint is still there
        assert first.proc is not None and first.proc.poll() is None
    finally:
        first.stop()
        first.cleanup()


def test_kineto_socket_dir_too_long_says_why(workdir: Path) -> None:
    kdir = workdir / ("k" * 120)
    line = _error_line(_dynod("--state-dir", str(workdir / "state"), "--trace-dir", str(workdir / "t"),
                              "--agent-socket", str(workdir / "a.sock"), "--kineto-socket-dir", str(kdir)))  # fmt: skip
    assert f"cannot bind kineto endpoint {kdir}/dynolog: AF_UNIX path too long" in line


def test_kineto_endpoint_name_too_long_says_why(workdir: Path) -> None:
    r = _dynod("--state-dir", str(workdir / "state"), "--trace-dir", str(workdir / "t"),
               "--agent-socket", str(workdir / "a.sock"), "--kineto-endpoint", "n" * 200)  # fmt: skip
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr and "None" not in r.stderr, r.stderr
    assert "kineto" in r.stderr and "too long" in r.stderr
