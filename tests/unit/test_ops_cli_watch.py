"""`dyno-cli metrics --watch` follows one daemon; with several hosts the usage error must say that it is --watch
that takes one (plain `metrics` takes many), not "this command talks to one daemon"."""

from __future__ import annotations

import pytest

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


def test_watch_with_several_hosts_names_watch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(["metrics", "--watch", "--hosts", "127.0.0.1:1,127.0.0.1:2"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--watch follows one daemon" in err and "2" in err
    assert "without --watch" in err
