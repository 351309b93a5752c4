"""Operating dynod as a fleet service: signals an operator or a terminal sends, and what the daemon does with them."""

from __future__ import annotations

import signal

import pytest

from dyno.client.client import DynoClient

from conftest import wait_for

pytestmark = pytest.mark.integration


def test_sighup_is_logged_and_ignored_not_a_silent_death(dynod_factory) -> None:
    """SIGHUP (a closed ssh terminal, `kill -HUP` expecting a reload) used to kill dynod at once with status 129:
    no drain, no log line, in-flight traces lost. The configuration is read only at start, so dynod says so and
    keeps serving; SIGTERM still stops it cleanly."""
    d = dynod_factory(gpu_backend="none", metrics=False)
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP" in d.log)
    assert "restart" in d.log.split("SIGHUP", 1)[1].splitlines()[0]
    with DynoClient(d.target) as c:
        assert c.health() == "SERVING"
    assert d.stop() == 0
