"""`dyno-cli trace --json` against a real dynod where nothing matches: the full object (manifest keys, `ok`,
`exit_code`), exit 1, or exit 0 with --no-fail-on-no-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("extra", "code", "status"), [([], 1, "failed"), (["--no-fail-on-no-process"], 0, "complete")])
def test_nothing_traced_json_has_the_documented_keys(
    dynod, tmp_path: Path, extra: list[str], code: int, status: str
) -> None:
    out = tmp_path / "out"
    r = run_cli(
        "trace", "--host", dynod.target, "--job-id", "cliux-nobody", "--duration-ms", "100",
        "--output-dir", str(out), "--json", *extra,
    )  # fmt: skip
    assert r.returncode == code, r.stderr
    d = json.loads(r.stdout)
    assert (d["ok"], d["exit_code"], d["status"], d["output_dir"]) == (code == 0, code, status, None)
    assert d["schema"] == "dyno.trace-manifest" and d["job_id"] == "cliux-nobody"
    assert d["hosts"][0]["state"] == "no_match" and d["processes"] == [] and d["report"] is None
    assert not out.exists()
