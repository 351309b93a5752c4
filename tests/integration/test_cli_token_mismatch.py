"""`dyno-cli trace` with a token that is not the daemon's: the error says the token differs, instead of "pass
--auth-token-file" to someone who passed it. Without a token it still says to pass one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration


def _token_file(path: Path, token: str) -> Path:
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return path


def test_a_wrong_token_is_called_wrong_and_a_missing_one_missing(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory("--auth-token-file", str(_token_file(tmp_path / "daemon.token", "d" * 32)), metrics=False)
    wrong = _token_file(tmp_path / "mine.token", "m" * 32)
    common = ["trace", "--host", d.target, "--job-id", "j", "--duration-ms", "100"]

    r = run_cli(*common, "--output-dir", str(tmp_path / "a"), "--auth-token-file", str(wrong))
    assert r.returncode == 1
    line = next(x for x in r.stderr.splitlines() if "Unauthenticated" in x)
    assert "not the daemon's" in line and "pass --auth-token-file" not in line, line

    r = run_cli(*common, "--output-dir", str(tmp_path / "b"), env={"DYNO_AUTH_TOKEN_FILE": ""})
    assert r.returncode == 1
    line = next(x for x in r.stderr.splitlines() if "Unauthenticated" in x)
    assert "pass --auth-token-file" in line, line
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
