"""`dyno-cli trace --no-fail-on-no-process` (a cron job tracing a job that may not run yet) exited 0 when no daemon
could be reached at all (a wrong port, a fleet-wide token or TLS mistake, every host down): the option now forgives
only hosts that answered and matched no process; a host that failed still counts: 1 when none answered, 3 when some
did. Against real gRPC servers on free loopback ports and ports nothing listens on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve

from conftest import dead_target

pytestmark = pytest.mark.unit


@pytest.fixture
def server() -> Iterator[FakeServer[FakeDynoServicer]]:
    srv = serve(lambda port: FakeDynoServicer(f"fake-{port}", job_id="other-job"))  # no process of the job traced
    yield srv
    srv.server.stop(0)


def _trace(hosts: str, tmp_path: Path, capsys) -> tuple[int, dict]:
    code = cli_main(
        ["trace", "--hosts", hosts, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
        + ["--output-dir", str(tmp_path / "out"), "--no-fail-on-no-process", "--json", "--call-timeout-s", "2"]
    )
    return code, json.loads(capsys.readouterr().out)


def test_every_host_down_is_still_a_failure(tmp_path: Path, capsys) -> None:
    code, doc = _trace(f"{dead_target()},{dead_target()}", tmp_path, capsys)
    assert code == 1 and doc["exit_code"] == 1 and doc["status"] == "failed"


def test_some_hosts_down_is_partial(server, tmp_path: Path, capsys) -> None:
    code, doc = _trace(f"{server.target},{dead_target()}", tmp_path, capsys)
    assert code == 3 and doc["exit_code"] == 3 and doc["status"] == "partial"


def test_every_host_answered_with_no_process_is_ok(server, tmp_path: Path, capsys) -> None:
    code, doc = _trace(server.target, tmp_path, capsys)
    assert code == 0 and doc["status"] == "complete"
    assert [h["state"] for h in doc["hosts"]] == ["no_match"]
