"""`--json` of the host-level commands across several hosts, one of them dead: every host is in the JSON with
`ok` and `error`, so a tool can tell which host failed (version and metrics included)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeServer, start_fake_servers

from conftest import free_port

pytestmark = pytest.mark.unit


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    (server,) = start_fake_servers(1)
    yield server
    server.stop(0)


@pytest.mark.parametrize("command", ["status", "ps", "version", "metrics"])
def test_every_host_is_in_the_json_with_ok_and_error(
    command: str, fake: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    code = cli_main([command, "--hosts", f"{fake.target},{dead}", "--timeout-s", "2", "--json"])
    assert code == 3
    data = json.loads(capsys.readouterr().out)
    entries = data["daemons"] if command == "version" else data
    assert [(e["host"], e["ok"]) for e in entries] == [(fake.target, True), (dead, False)]
    assert entries[0]["error"] is None and entries[1]["error"].startswith("Unavailable: ")


@pytest.mark.parametrize("command", ["status", "ps", "metrics"])
def test_one_dead_host_is_an_entry_with_its_error_not_an_empty_answer(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert cli_main([command, "--host", dead, "--timeout-s", "1", "--json"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["host"] == dead and entry["ok"] is False and entry["error"].startswith("Unavailable: ")
