"""Help text that matches behaviour: `dyno-cli fetch --help` lists neither "an output folder that exists" among its
usage errors (fetch resumes into the folder an interrupted run left: that is what it is for) nor "a host ... matched
nothing" among its partial results (fetch matches nothing: it attaches to a trace by id)."""

from __future__ import annotations

import pytest

from conftest import cli_help

pytestmark = pytest.mark.unit


def test_fetch_help_does_not_refuse_an_existing_folder() -> None:
    text = cli_help("fetch")
    assert "an output folder that exists" not in text and "matched nothing" not in text
    assert "still tracing" in text


def test_trace_help_still_refuses_an_existing_folder() -> None:
    assert "an output folder that exists" in cli_help("trace")


def test_trace_help_gives_the_process_limit_order_the_daemons_use() -> None:
    """The daemons' order (trainers, then launchers, then DataLoader workers, which are leaf processes too), as
    `ps --help` and docs/CLUSTER.md say: not "leaf workers before their launchers"."""
    text = cli_help("trace")
    assert "--process-limit N" in text and "trainers first, then launchers, then DataLoader workers" in text
