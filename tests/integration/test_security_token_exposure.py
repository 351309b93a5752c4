"""What a user of a real dynod sees of its auth set-up: a dynod on loopback without a token starts without a
security warning (local users are told apart), and with a token `dyno-cli` shows processes' command lines
(arguments can carry secrets) and streams live metrics only to callers with the token."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from dyno.daemon.auth import HIDDEN_CMDLINE
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import Dynod, run_cli

pytestmark = pytest.mark.integration

TOKEN = "integration-token-0123456789abcdef"
SECRET_CMDLINE = "python train.py --db-url=postgres://u:hunter2@db/x"


def _token_file(tmp_path: Path) -> Path:
    p = tmp_path / "token"
    p.write_text(TOKEN + "\n")
    p.chmod(0o600)
    return p


def test_a_dynod_on_loopback_without_a_token_starts_without_a_security_warning(
    dynod_factory: Callable[..., Dynod],
) -> None:
    """Local callers are told apart by the kernel (test_security_local_users): nothing to warn about on loopback."""
    bare = dynod_factory(metrics=False)
    assert "SECURITY" not in bare.log


def test_a_token_dynod_shows_command_lines_and_live_metrics_only_with_the_token(
    dynod_factory: Callable[..., Dynod], tmp_path: Path
) -> None:
    token = _token_file(tmp_path)
    d = dynod_factory("--auth-token-file", str(token), metrics=False)
    with grpc.insecure_channel(f"unix:{d.agent_socket}") as channel:
        agent_pb2_grpc.AgentStub(channel).Register(
            agent_pb2.RegisterRequest(pid=os.getpid(), job_id="exposed", cmdline=SECRET_CMDLINE), timeout=10
        )
    hosts = ["--hosts", d.target]
    anon = run_cli("ps", *hosts, "--json")
    assert anon.returncode == 0, anon.stderr
    assert "hunter2" not in anon.stdout and HIDDEN_CMDLINE in anon.stdout
    mine = run_cli("ps", *hosts, "--json", "--auth-token-file", str(token))
    assert mine.returncode == 0, mine.stderr
    (proc,) = json.loads(mine.stdout)["processes"]
    assert proc["cmdline"] == SECRET_CMDLINE

    watch = run_cli("metrics", *hosts, "--watch")  # refused at once: it would hold one of the 16 stream slots
    assert watch.returncode != 0 and "not authenticated" in watch.stderr and "Traceback" not in watch.stderr
