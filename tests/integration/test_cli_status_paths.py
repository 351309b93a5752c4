"""`dyno-cli status` prints absolute paths even when dynod was started with relative ones (from its own working
directory): the trace dir and the agent socket, in the text view and in --json."""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration


def test_status_shows_absolute_paths_for_a_daemon_given_relative_ones(
    dynod_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = dynod_factory(start=False)
    d.args += ["--trace-dir", "rel-traces", "--state-dir", "rel-state", "--agent-socket", "rel.sock"]
    monkeypatch.chdir(d.dir)  # dynod inherits it: the relative paths mean d.dir/...
    d.start()
    monkeypatch.chdir("/")  # dyno-cli runs elsewhere
    r = run_cli("status", "--host", d.target)
    assert r.returncode == 0, r.stderr
    traces = next(line for line in r.stdout.splitlines() if line.startswith("traces"))
    agent = next(line for line in r.stdout.splitlines() if line.startswith("agent"))
    assert f"traces      {d.dir / 'rel-traces'} (" in traces
    assert f"agent       {d.dir / 'rel.sock'} " in agent
    doc = json.loads(run_cli("status", "--host", d.target, "--json").stdout)
    assert doc["trace_dir"] == str(d.dir / "rel-traces") and doc["agent_socket"] == str(d.dir / "rel.sock")
    assert os.path.isabs(doc["trace_dir"]) and os.path.isabs(doc["agent_socket"])
    assert (d.dir / "rel.sock").exists()  # where dynod really put it
