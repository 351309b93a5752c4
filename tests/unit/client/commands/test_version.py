"""`dyno-cli version --json`: every daemon entry has the same keys (docs/CLUSTER.md: `{host, ok, version, api,
python, grpc, error}`), failed ones with null values, as `status --json` has `"status": null`, so a tool may read
`d["version"]` for each daemon. Against a real gRPC server on a free loopback port and a port nothing listens on."""

from __future__ import annotations

import json

import pytest

from dyno.client.cli import main as cli_main

from conftest import dead_target

pytestmark = pytest.mark.unit


def test_failed_daemons_have_every_key_with_null(fake_dynod, capsys: pytest.CaptureFixture[str]) -> None:
    dead = dead_target()
    code = cli_main(["version", "--json", "--hosts", f"{fake_dynod.target},{dead}", "--timeout-s", "2"])
    daemons = json.loads(capsys.readouterr().out)["daemons"]
    assert code == 3
    ok, failed = daemons
    assert set(ok) == set(failed) == {"host", "ok", "version", "api", "python", "grpc", "error"}
    assert ok["ok"] and ok["version"] and ok["error"] is None
    assert not failed["ok"] and failed["version"] is None and failed["grpc"] is None
    assert failed["error"].startswith("Unavailable: ")
