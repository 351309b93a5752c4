"""`fetch --json` (and `trace --json`) when no host has anything: the same keys as any other run (`exit_code`,
`status`, `summary`, `schema` among them), so a tool reading `exit_code` or `status` as docs/CLUSTER.md documents
them works on the runs that went wrong too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit

_KEYS = {"schema", "version", "trace_id", "job_id", "status", "exit_code", "client", "request", "timings"}
_KEYS |= {"summary", "hosts", "processes", "errors", "ok", "output_dir", "report", "analysis_error", "manifest_error"}


def test_fetch_json_when_no_host_has_the_trace(
    daemons: FakeDaemons, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (a, _), (b, _) = daemons.start(set()), daemons.start(set())
    code = cli_main(["fetch", "--hosts", f"{a},{b}", "--trace-id", "t-none", "--output-dir", str(tmp_path), "--json"])
    assert code == 1
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= _KEYS
    assert (out["ok"], out["exit_code"], out["status"], out["output_dir"]) == (False, 1, "failed", None)
    assert out["summary"]["hosts"] == out["summary"]["hosts_failed"] == 2
    assert [h["error_type"] for h in out["hosts"]] == ["NotFound", "NotFound"]
    assert list(tmp_path.iterdir()) == []  # nothing written
