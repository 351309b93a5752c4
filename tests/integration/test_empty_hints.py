"""A new user's first `dyno-cli ps` / `dyno-cli trace` against a daemon where their trainer did not register: after
the one line of what happened, one `hint:` line on stderr says how a process registers (or, for `ps --job-id`, how
to see the jobs that are registered), so they are not left with just "nothing traced"."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.client.commands._common import REGISTER_HINT

from conftest import run_cli

pytestmark = pytest.mark.integration


def test_ps_on_an_empty_daemon_says_how_a_trainer_registers(dynod) -> None:
    res = run_cli("ps", "--host", dynod.target)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "no processes registered on 1 host(s)"
    assert res.stderr.strip() == f"dyno-cli ps: {REGISTER_HINT}"


def test_ps_of_an_unknown_job_points_to_the_unfiltered_list(dynod) -> None:
    res = run_cli("ps", "--host", dynod.target, "--job-id", "nope")
    assert res.returncode == 0, res.stderr
    assert "without --job-id" in res.stderr and REGISTER_HINT not in res.stderr


def test_ps_json_prints_no_hint(dynod) -> None:
    res = run_cli("ps", "--host", dynod.target, "--json")
    assert res.returncode == 0 and res.stderr == ""


def test_trace_with_nothing_registered_ends_with_the_hint(dynod, tmp_path: Path) -> None:
    res = run_cli(
        "trace", "--host", dynod.target, "--job-id", "exp1", "--duration-ms", "100", "--start-delay-s", "0",
        "--output-dir", str(tmp_path / "out"),
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[-2] == "dyno-cli trace: nothing traced on any of 1 host(s)"
    assert lines[-1] == f"dyno-cli trace: {REGISTER_HINT}"
    assert not (tmp_path / "out").exists()  # as before: nothing traced, no folder
