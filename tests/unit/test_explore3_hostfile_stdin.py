"""`--hostfile -` reads the host list from standard input (`squeue -h -o %N -j 36199 | dyno-cli status --hostfile -`,
as `-` means for most tools): it said "hostfile - does not exist". A real `dyno-cli` process against a real gRPC
server on a free loopback port."""

from __future__ import annotations

import subprocess

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT

pytestmark = pytest.mark.unit


def test_hostfile_dash_is_stdin(fake_dynod) -> None:
    r = subprocess.run(
        [*PYTHON_M_DYNO_CLIENT, "ps", "--hostfile", "-", "--json"],
        input=f"# from squeue\n{fake_dynod.target} slots=8\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert '"pid": 1000' in r.stdout


def test_a_bad_line_on_stdin_names_it(fake_dynod) -> None:
    r = subprocess.run(
        [*PYTHON_M_DYNO_CLIENT, "status", "--hostfile", "-"],
        input=f"{fake_dynod.target}\nnode[1-\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "<stdin>:2: unclosed '['" in r.stderr, r.stderr
