"""A state dir dynod cannot create or write leaves it sampling and serving, with the job database's problem in
status (it holds nothing else); the trace dir is still required."""

from __future__ import annotations

import shutil

import pytest
from small_daemon import OneValueSampler, daemon_config

from dyno.daemon.app import Daemon, StartupError
from dyno.daemon.jobs.store import JobQuery

from conftest import short_tmpdir


def test_a_state_dir_that_cannot_be_made_leaves_dynod_running_and_says_so() -> None:
    d = short_tmpdir("dyno-state-")
    (d / "file").write_text("")
    daemon = Daemon(daemon_config(d, state_dir=d / "file" / "state"), samplers=[OneValueSampler()])  # type: ignore[list-item]
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
    daemon = Daemon(daemon_config(d, trace_dir=d / "file" / "traces"), samplers=[OneValueSampler()])  # type: ignore[list-item]
    try:
        with pytest.raises(StartupError, match="cannot create directory"):
            daemon.start()
    finally:
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)
