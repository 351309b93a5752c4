"""`dyno-cli status` says whether periodic profiling is on, with the daemon's words (interval, next moments); nothing
from a daemon without it."""

from __future__ import annotations

import pytest

from dyno.client.commands.status import render
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _line(status: dyno_pb2.Status) -> list[str]:
    return [ln for ln in render(status, "localhost:1778").splitlines() if ln.startswith("periodic")]


def test_periodic_line_says_off_or_the_schedule() -> None:
    assert _line(dyno_pb2.Status(periodic_profiling="off")) == ["periodic    off"]
    on = "on: every 1800 s at a per-job offset, 5 steps (agent) ...; next: train-7 at 02:17:43Z"
    assert _line(dyno_pb2.Status(periodic_profiling=on)) == [f"periodic    {on}"]
    assert _line(dyno_pb2.Status()) == []  # a dynod from before periodic profiling
