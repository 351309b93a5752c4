"""dyno's own warnings printed by dyno-cli read like its errors: `dyno-cli: warning: ...`, not the bare message of
Python's last-resort handler, and only once."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.unit


def test_short_token_warning_is_prefixed_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("short")
    token.chmod(0o600)
    r = run_cli("status", "--host", "127.0.0.1:1", "--auth-token-file", str(token), "--call-timeout-s", "2")
    assert r.returncode == 1, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "has only 5 characters" in ln]
    assert warnings == [f"dyno-cli: warning: auth token in {token} has only 5 characters; use at least 16 random ones"]
    assert r.stderr.splitlines()[-1].startswith("dyno-cli: error: 127.0.0.1:1: cannot reach dynod")


def test_no_warning_lines_for_a_good_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a" * 32)
    token.chmod(0o600)
    r = run_cli("status", "--host", "127.0.0.1:1", "--auth-token-file", str(token), "--call-timeout-s", "2")
    assert r.returncode == 1 and "warning" not in r.stderr, r.stderr
