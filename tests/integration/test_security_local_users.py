"""Local users against a root dynod without a token: user `nobody` calls it over the Dyno API's Unix socket and
over loopback TCP (each caller identified by the kernel), sees the command lines of, sees in traces, traces, cancels
and fetches only its own processes, and can neither register root's process nor make its own join root's job; root
still sees and does everything.

A real in-process dynod (gRPC, the API's Unix socket, the agent socket) run by the test (root), and a separate
Python process run as `nobody` for each of that user's calls (tests/integration/local_user_calls.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from local_user_calls import read_watch
from small_daemon import daemon_config

from dyno.daemon.app import Daemon
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.tracing.service import OTHERS_CMDLINE
from dyno.daemon.tracing.trust import make_trace_dir
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2, dyno_pb2_grpc

from conftest import short_tmpdir

pytestmark = pytest.mark.integration

SECRET_CMDLINE = "python train.py --secret-api-key=hunter2hunter2"
ROOT_JOB = "root-job"
JOB_RECORDS = [("root-accounted", "root"), ("nobody-accounted", "nobody")]
HERE = Path(__file__).resolve().parent
SITE = sysconfig.get_paths()["purelib"]  # this venv's packages, dyno's editable install among them
# argv: SITE SCRIPT ARGS...; site.addsitedir reads the editable install's .pth file, which PYTHONPATH would not
_BOOT = (
    "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv.pop(0); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _nobody_python() -> str | None:
    """A Python of this one's version that user nobody may run (this venv's may sit under /root), or None."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(name, path="/usr/bin:/usr/local/bin")):
        if not candidate:
            continue
        check = subprocess.run(
            ["runuser", "-u", "nobody", "--", candidate, "-c", "import sys; print(tuple(sys.version_info[:2]))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode == 0 and check.stdout.strip() == str(tuple(sys.version_info[:2])):
            return candidate
    return None


NOBODY_PYTHON = _nobody_python()
needs_nobody = pytest.mark.skipif(NOBODY_PYTHON is None, reason="needs root, runuser and a Python nobody may run")


def dyno_cli_as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    assert NOBODY_PYTHON is not None
    boot = (
        "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); "
        "runpy.run_module('dyno.client', run_name='__main__')"
    )
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", NOBODY_PYTHON, "-c", boot, SITE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
    )


def as_nobody(*args: str) -> dict[str, Any]:
    assert NOBODY_PYTHON is not None
    out = subprocess.run(
        ["runuser", "-u", "nobody", "--", NOBODY_PYTHON, "-c", _BOOT, SITE, str(HERE / "local_user_calls.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@dataclass
class Env:
    daemon: Daemon
    tcp: str
    unix: str
    agent_socket: str
    root_pid: int
    root_trace: str


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    d = short_tmpdir("dyno-users-")
    d.chmod(0o755)  # nobody reaches the sockets in it
    cfg = daemon_config(d, interval_s=0.5, agent_socket=d / "run" / "agent.sock")
    daemon = Daemon(cfg)
    daemon.start()
    watch: Any = None
    agent_channel = grpc.insecure_channel(f"unix:{cfg.agent_socket_path}")
    root_channel = grpc.insecure_channel(f"127.0.0.1:{daemon.port}")
    try:
        agent = agent_pb2_grpc.AgentStub(agent_channel)
        reg = agent.Register(
            agent_pb2.RegisterRequest(pid=os.getpid(), job_id=ROOT_JOB, cmdline=SECRET_CMDLINE), timeout=5
        )
        # its Watch stream open, as a trainer's agent keeps it: an unwatched registration is dropped after
        # seconds, and the module's calls may take longer than that (a loaded machine, parallel workers)
        watch = agent.Watch(agent_pb2.WatchRequest(pid=os.getpid(), session_id=reg.session_id))
        read_watch(watch)
        started = dyno_pb2_grpc.DynoStub(root_channel).StartTrace(
            dyno_pb2.TraceRequest(job_id=ROOT_JOB, duration_ms=60000), timeout=5
        )
        assert list(started.matched_pids) == [os.getpid()]
        assert daemon.jobs._store is not None  # one ended job record of root's and one of nobody's, for ListJobs
        daemon.jobs._store.save(JobRecord(job, user, "h", 1, 2, False) for job, user in JOB_RECORDS)
        yield Env(
            daemon,
            f"127.0.0.1:{daemon.port}",
            f"unix:{cfg.api_socket_path}",
            str(cfg.agent_socket_path),
            os.getpid(),
            started.trace_id,
        )
    finally:
        if watch is not None:
            watch.cancel()
        agent_channel.close()
        root_channel.close()
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)


TRANSPORTS = ["unix", "tcp"]


def _target(env: Env, transport: str) -> str:
    return env.unix if transport == "unix" else env.tcp


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_does_not_see_roots_command_line(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "list")
    assert got["code"] == "OK"
    mine = [p for p in got["processes"] if p["pid"] == env.root_pid]
    assert mine == [{"pid": env.root_pid, "cmdline": OTHERS_CMDLINE}]
    assert "hunter2" not in json.dumps(got)


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_lists_only_its_own_jobs(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "jobs")
    assert got["code"] == "OK", got
    assert got["jobs"] == [["nobody-accounted", "nobody"]]
    assert as_nobody(_target(env, transport), "jobs", "root")["jobs"] == []  # asking for root's: none are nobody's


def test_root_lists_every_job(env: Env) -> None:
    with grpc.insecure_channel(env.unix) as channel:
        answer = dyno_pb2_grpc.DynoStub(channel).ListJobs(dyno_pb2.ListJobsRequest(), timeout=10)
    listed = [[j.job_id, j.user] for j in answer.jobs if j.job_id.endswith("-accounted")]
    assert listed == [list(r) for r in JOB_RECORDS]


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_cannot_trace_roots_processes(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "start", ROOT_JOB)
    assert got["code"] == "OK" and got["triggered"] == []
    assert "run as other users" in got["message"] and "uid 65534 may trace only its own" in got["message"]


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_cannot_cancel_roots_trace(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "cancel", env.root_trace)
    assert got["code"] == "PERMISSION_DENIED", got
    assert "may cancel only traces of its own processes" in got["detail"]
    view = env.daemon.tracing.manager.get(env.root_trace)
    assert not view.finished  # still running: not cancelled


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_sees_none_of_roots_processes_in_roots_trace(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "get", env.root_trace)
    assert got["code"] == "OK", got
    assert got["pids"] == []


@pytest.fixture
def nobodys_sleep() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(["sleep", "60"], user=65534) as p:
        try:
            yield p
        finally:
            p.kill()


@needs_nobody
def test_nobody_sees_only_its_own_process_of_a_trace_of_both_users(
    env: Env, nobodys_sleep: subprocess.Popen[bytes]
) -> None:
    job, sleeper = "mixed-job", nobodys_sleep.pid
    got = as_nobody(env.unix, "register", env.agent_socket, str(sleeper), job)
    # poll(): None while the sleep lives, else how it ended (-9: killed), which a refused pid comes down to
    assert got["code"] == "OK", (got, nobodys_sleep.poll())
    with subprocess.Popen(["sleep", "60"]) as roots, grpc.insecure_channel(f"unix:{env.agent_socket}") as channel:
        try:  # root's process joins nobody's job: an admin's may
            agent_pb2_grpc.AgentStub(channel).Register(agent_pb2.RegisterRequest(pid=roots.pid, job_id=job), timeout=5)
            with grpc.insecure_channel(env.unix) as root_channel:
                dyno = dyno_pb2_grpc.DynoStub(root_channel)
                started = dyno.StartTrace(dyno_pb2.TraceRequest(job_id=job, duration_ms=60000), timeout=5)
                assert sorted(started.matched_pids) == sorted([sleeper, roots.pid])
                for target in (env.unix, env.tcp):
                    got = as_nobody(target, "get", started.trace_id)
                    assert got["code"] == "OK" and got["pids"] == [sleeper], got
                roots_view = dyno.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), timeout=5)
                assert sorted(p.pid for p in roots_view.processes) == sorted([sleeper, roots.pid])
                dyno.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id=started.trace_id), timeout=5)
        finally:
            roots.kill()


@needs_nobody
def test_nobody_cannot_make_its_own_process_join_roots_job(env: Env, nobodys_sleep: subprocess.Popen[bytes]) -> None:
    got = as_nobody(env.unix, "register", env.agent_socket, str(nobodys_sleep.pid), ROOT_JOB)
    assert got["code"] == "PERMISSION_DENIED" and got["reason"] == "JOB_OF_ANOTHER_USER", got
    assert f"job {ROOT_JOB!r} has registered processes of another user (uid 0)" in got["detail"], got
    assert env.daemon.tracing.registry.get(nobodys_sleep.pid) is None


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_cannot_fetch_roots_trace_file(env: Env, transport: str) -> None:
    got = as_nobody(_target(env, transport), "fetch", env.root_trace, str(env.root_pid))
    assert got["code"] == "PERMISSION_DENIED", got
    assert "another user's process" in got["detail"]


@needs_nobody
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nobody_traces_fetches_and_cancels_its_own_process(env: Env, transport: str) -> None:
    job = f"nobody-job-{transport}"
    got = as_nobody(_target(env, transport), "own", env.agent_socket, job)
    assert got["code"] == "OK", got
    assert got["triggered"] == [got["pid"]] and got["delivered"] == got["trace_id"]
    assert got["folder"] == [65534, "0o700"]  # its trace folder is its own, closed to other users
    assert got["report"] == "OK" and got["fetched"] == 2, got
    assert got["cancel"] == "OK", got
    assert got["own_cmdline"] == ["own job"]  # its own command line it sees


@needs_nobody
def test_nobody_cannot_read_roots_trace_file_from_disk(env: Env) -> None:
    folder = env.daemon.config.trace_dir / env.root_trace
    assert (folder.stat().st_uid, folder.stat().st_mode & 0o7777) == (0, 0o700)
    trace_file = folder / f"h_{env.root_pid}.pt.trace.json.gz"
    trace_file.write_bytes(b"secret")  # where a trainer of root's writes, at a name anyone can guess
    trace_file.chmod(0o644)  # the usual umask's mode
    got = as_nobody(env.tcp, "read", str(trace_file))
    assert got["code"] == "EACCES", got


@needs_nobody
def test_nobody_fetches_only_its_own_files_of_traces_dynod_does_not_know(env: Env) -> None:
    """Traces from before a restart without a record (dynod restarted mid-trace): the file's owner decides."""
    for trace_id, owner in (("forgotten-root", 0), ("forgotten-nobody", 65534)):
        folder = make_trace_dir(env.daemon.config.trace_dir, trace_id, owner)
        trace_file = folder / f"{env.daemon.hostname}_4242.pt.trace.json.gz"
        trace_file.write_bytes(b"{}")
        os.chown(trace_file, owner, -1)
    roots = as_nobody(env.unix, "fetch", "forgotten-root", "4242")
    assert roots["code"] == "PERMISSION_DENIED" and "its file is not uid 65534's" in roots["detail"], roots
    own = as_nobody(env.unix, "fetch", "forgotten-nobody", "4242")
    assert own == {"code": "OK", "detail": "", "bytes": 2}


@needs_nobody
def test_nobody_cannot_register_roots_process(env: Env) -> None:
    with subprocess.Popen(["sleep", "60"]) as roots:
        try:
            got = as_nobody(env.unix, "register", env.agent_socket, str(roots.pid), ROOT_JOB)
        finally:
            roots.kill()
    assert got["code"] == "PERMISSION_DENIED", got
    assert f"process {roots.pid} runs as uid 0, and uid 65534 may register only its own processes" in got["detail"]
    assert env.daemon.tracing.registry.get(roots.pid) is None


@needs_nobody
def test_dyno_cli_ps_as_nobody_shows_roots_process_without_its_command_line(env: Env) -> None:
    r = dyno_cli_as_nobody("ps", "--host", "127.0.0.1", "--port", str(env.daemon.port), "--json")
    assert r.returncode == 0, r.stderr
    assert str(env.root_pid) in r.stdout and OTHERS_CMDLINE in r.stdout and "hunter2" not in r.stdout


def test_root_sees_command_lines_over_both_transports(env: Env) -> None:
    for target in (env.unix, env.tcp):
        with grpc.insecure_channel(target) as channel:
            answer = dyno_pb2_grpc.DynoStub(channel).ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=5)
        assert SECRET_CMDLINE in [p.cmdline for p in answer.processes]
