"""dynod start-up: a failure of its local endpoints (agent socket, kineto socket dir) is one line naming the path
and saying why, exit 1, no traceback; the start-up log says what it found of GPUs, one line per problem."""

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
        first.close()


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


# What dynod's start-up log says about GPUs: one line per problem, and a flag that cannot act says so.


def test_sim_gpus_without_the_sim_backend_is_a_warning_not_silence(dynod_factory) -> None:
    """`dynod --sim-gpus 4` (forgetting --gpu-backend sim) started with NVML unavailable and no simulated GPU, and
    nothing said that the flag had no effect."""
    d = dynod_factory(gpu_backend="auto", sim_gpus=3, metrics=False)  # conftest passes --sim-gpus 3
    lines = [line for line in d.lines if "--sim-gpus" in line]
    assert len(lines) == 1 and "WARNING" in lines[0], d.log
    assert "--sim-gpus 3 is ignored: gpu_backend auto never simulates; simulated GPUs need --gpu-backend" in lines[0]


def test_sim_gpus_with_gpus_disabled_on_purpose_is_no_warning(dynod_factory) -> None:
    d = dynod_factory(gpu_backend="none", sim_gpus=3, metrics=False)
    assert "--sim-gpus" not in d.log


def test_sim_gpus_with_the_sim_backend_is_no_warning(dynod_factory) -> None:
    d = dynod_factory(gpu_backend="sim", sim_gpus=2, metrics=False)
    assert "--sim-gpus" not in d.log and "simulated" in d.log


def test_nvml_unavailable_is_one_line(dynod_factory) -> None:
    """Without a driver (this host), NVML's reason was logged twice: INFO by the GPU sampler, then WARNING by the
    daemon ("sampler gpu: unavailable: ...")."""
    pytest.importorskip("pynvml")
    d = dynod_factory(gpu_backend="auto", metrics=False)
    start = d.log.split(" ready: ", 1)[0]
    if "sampler gpu: ok" in start:
        pytest.skip("this host has a working NVML")
    reason_lines = [line for line in start.splitlines() if "NVML" in line]
    assert len(reason_lines) == 1 and "WARNING" in reason_lines[0] and "sampler gpu: unavailable" in reason_lines[0]
