"""A dynod that cannot bind its gRPC port says so in exactly one line of its own: gRPC's C core printed
"E... add_port.cc:83] Failed to add port to server: ..." first, and dynod's line said only "Failed to bind ...;
set GRPC_VERBOSITY=debug ... (address in use or not available?)"."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def _run_dynod(dynod_factory, listen: str, port: int) -> subprocess.CompletedProcess:
    d = dynod_factory(gpu_backend="none", metrics=False, start=False)
    args = list(d.args)
    args[args.index("--listen") + 1] = listen
    args[args.index("--port") + 1] = str(port)
    args += ["--log-level", "warning"]  # nothing else of dynod's on stderr: only its error line is left
    # the bind is the subject: an address beyond loopback without auth is refused before it (test_cluster)
    args += ["--insecure-allow-unauthenticated-remote"]
    return subprocess.run([sys.executable, "-m", "dyno.daemon", *args], capture_output=True, text=True, timeout=60)


def test_a_port_in_use_is_exactly_one_line_of_dynod_and_exit_1(dynod_factory) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = _run_dynod(dynod_factory, "127.0.0.1", port)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [
        f"dynod: error: cannot listen on 127.0.0.1:{port}: Address already in use (another program listens on that "
        "port, perhaps another dynod: stop it or choose another port)"
    ]


def test_an_address_that_does_not_resolve_is_exactly_one_line_and_exit_1(dynod_factory) -> None:
    r = _run_dynod(dynod_factory, "256.1.1.1", 0)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynod: error: cannot listen on 256.1.1.1:0: cannot resolve"), lines


def test_an_agent_socket_that_cannot_be_bound_is_exactly_one_line_with_the_reason(dynod_factory) -> None:
    # /proc takes no new files: the bind fails where the directory exists (gRPC printed its own C++ line first)
    d = dynod_factory(gpu_backend="none", metrics=False, start=False)
    args = list(d.args)
    args[args.index("--agent-socket") + 1] = "/proc/dyno-test-agent.sock"
    args += ["--log-level", "warning"]
    r = subprocess.run([sys.executable, "-m", "dyno.daemon", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [
        "dynod: error: cannot bind the agent socket /proc/dyno-test-agent.sock: No such file or directory"
    ]
