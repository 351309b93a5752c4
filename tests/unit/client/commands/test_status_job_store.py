"""`dyno-cli status` names the job database's state: ok, or why it cannot be used; nothing from a daemon without
job accounting."""

from __future__ import annotations

import pytest

from dyno.client.commands.status import render
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _line(status: dyno_pb2.Status) -> list[str]:
    return [ln for ln in render(status, "localhost:1778").splitlines() if ln.startswith("job store")]


def test_job_store_line_says_ok_or_the_problem() -> None:
    assert _line(dyno_pb2.Status(job_store="ok")) == ["job store   ok"]
    problem = "job database /var/lib/dyno/jobs.sqlite3: cannot open it: file is not a database (corrupt: move it aside)"
    assert _line(dyno_pb2.Status(job_store=problem)) == [f"job store   {problem}"]
    assert _line(dyno_pb2.Status()) == []
