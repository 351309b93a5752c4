"""A state dir dynod cannot create or write leaves it sampling and serving, with the job database's problem in
status (it holds nothing else); the trace dir is still required."""

from __future__ import annotations

import shutil

import pytest
from small_daemon import OneValueSampler

from dyno.daemon.app import Daemon, StartupError
from dyno.daemon.config import DaemonConfig
from dyno.daemon.jobs.store import JobQuery

from conftest import short_tmpdir


def _config(d, **kw) -> DaemonConfig:  # type: ignore[no-untyped-def]
    base = dict(
        port=0,
        metrics_port=0,
        kineto_endpoint="off",
        interval_s=0.1,
        history_s=10,
        state_dir=d / "state",
        trace_dir=d / "traces",
        agent_socket=d / "agent.sock",
    )
    return DaemonConfig(**{**base, **kw})


def test_a_state_dir_that_cannot_be_made_leaves_dynod_running_and_says_so() -> None:
    d = short_tmpdir("dyno-state-")
    (d / "file").write_text("")
    daemon = Daemon(_config(d, state_dir=d / "file" / "state"), samplers=[OneValueSampler()])  # type: ignore[list-item]
    try:
        daemon.start()
        status = daemon.status()
        assert status.job_store.startswith(f"job database in {d / 'file' / 'state'}")
        assert daemon.jobs.list(JobQuery(), 0, 10) == ([], 0)
    finally:
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)


def test_a_trace_dir_that_cannot_be_made_still_stops_the_start() -> None:
    d = short_tmpdir("dyno-state-")
    (d / "file").write_text("")
    daemon = Daemon(_config(d, trace_dir=d / "file" / "traces"), samplers=[OneValueSampler()])  # type: ignore[list-item]
    try:
        with pytest.raises(StartupError, match="cannot create directory"):
            daemon.start()
    finally:
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)
