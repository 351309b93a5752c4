"""A trainer in its own pid namespace (a container with the agent socket mounted in) against a dynod outside it:
its pids name other processes there (its pid 1 is the host's init), so it is refused with a reason, not registered
under the host's pid 1, where a second such job silently took the first one's registration."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from dyno.client.client import DynoClient

from conftest import wait_for

pytestmark = pytest.mark.integration

# Registers explicitly (no torch needed), says whether it got registered within argv[3] seconds; then exits, or with
# argv[4] "hold" stays registered until its stdin closes.
AGENT = textwrap.dedent(
    """
    import os, sys, time
    from dyno.client import agent
    a = agent.start(sys.argv[1], sys.argv[2])
    registered = a.wait_registered(float(sys.argv[3]))
    print("registered" if registered else "not registered", os.getpid(), flush=True)
    if sys.argv[4:] == ["hold"]:
        sys.stdin.read()
    """
)


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_agent_in_another_pid_namespace_is_refused_with_a_reason(dynod_factory):
    if not _unshare_works():
        pytest.skip("cannot create a pid namespace here (unshare --pid needs root or user namespaces)")
    d = dynod_factory()
    job = f"ns-{os.getpid()}"
    # exec'd as the namespace's first process, as `docker run ... python train.py` is: its pid is 1
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", AGENT, job, str(d.agent_socket), "4"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert out.stdout.strip() == "not registered 1", (out.stdout, out.stderr)
    with DynoClient(d.target, timeout_s=5) as c:
        assert [p.pid for p in c.list_processes(job).processes] == []
    # one clear line in the trainer's stderr, no traceback
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert "refused to register this process" in lines[0] and "another pid namespace" in lines[0]


def test_agent_in_the_daemons_pid_namespace_still_registers(dynod_factory):
    d = dynod_factory()
    job = f"same-ns-{os.getpid()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT, job, str(d.agent_socket), "20", "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with DynoClient(d.target, timeout_s=5) as c:
            pids = wait_for(lambda: [p.pid for p in c.list_processes(job).processes], 10)
        assert pids == [proc.pid]
    finally:
        out, err = proc.communicate("", timeout=30)
    assert out.startswith("registered"), (out, err)
