"""dynod's registry caps on a real daemon: a small --max-processes / --max-processes-per-uid refuses the next agent
registration with the existing RESOURCE_EXHAUSTED answer, and a bad value stops dynod with one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import Dynod, short_tmpdir, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _register(d: Dynod, pid: int) -> agent_pb2.RegisterResponse:
    with grpc.insecure_channel(f"unix:{d.agent_socket}") as channel:
        stub = agent_pb2_grpc.AgentStub(channel)
        return stub.Register(agent_pb2.RegisterRequest(pid=pid, job_id="caps", gpu=-1), timeout=10)


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--max-processes", "2 processes are registered with this daemon, its limit (2, dynod's max_processes)"),
        ("--max-processes-per-uid", "the limit per user (2, dynod's max_processes_per_uid)"),
    ],
)
def test_a_small_cap_refuses_the_next_registration(
    dynod_factory, sleepers: list[subprocess.Popen[bytes]], flag: str, message: str
) -> None:
    d = dynod_factory(flag, "2", gpu_backend="none", metrics=False)
    assert _register(d, sleepers[0].pid).session_id
    assert _register(d, sleepers[1].pid).session_id
    with pytest.raises(grpc.RpcError) as e:
        _register(d, sleepers[2].pid)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert message in e.value.details() and f"pid {sleepers[2].pid} is not registered" in e.value.details()
    assert _register(d, sleepers[0].pid).session_id  # a registered process may always register again
    wait_for(lambda: "agent registration refused" in d.log)  # the operator is told too (stderr is read by a thread)


@pytest.mark.parametrize(
    "args, line",
    [
        (["--max-processes", "0"], "dynod: error: argument --max-processes: must be 1-65536: '0'"),
        (["--max-processes-per-uid", "x"], "dynod: error: argument --max-processes-per-uid: not an integer: 'x'"),
        (
            ["--config", "{file}", "--max-processes", "5"],  # the file's value is checked though the flag overrides it
            "dynod: error: {file}: max_processes 100000 is outside 1-65536",
        ),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    tmp = short_tmpdir("dyno-caps-")
    try:
        file = tmp / "dynod.toml"
        file.write_text("max_processes = 100000\n")
        argv = [a.replace("{file}", str(file)) for a in args]
        r = subprocess.run(
            [sys.executable, "-m", "dyno.daemon", "--state-dir", str(tmp / "s"), "--trace-dir", str(tmp / "t"), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == line.replace("{file}", str(file)), r.stderr
    assert "Traceback" not in r.stderr
