"""A sampler stuck in sample() is logged (one ERROR) when the stall happens, not at the next status call or
Prometheus scrape: a host without either (metrics_port 0, nobody running dyno-cli status) had nothing in its journal,
though docs/INSTALL_SYSTEMD.md lists that line as the one to alert on."""

from __future__ import annotations

import logging
import threading

import pytest

from dyno.daemon.history import History
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.samplers.base import Reading, SamplerState

from conftest import wait_for

pytestmark = pytest.mark.unit


class Stuck:
    name = "gpu"

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def state(self) -> SamplerState:
        return SamplerState(self.name, True, "fake")

    def sample(self) -> list[Reading]:
        self.calls += 1
        if self.calls > 1:
            self.release.wait(30)
        return [Reading("gpu_value", 1.0)]

    def close(self) -> None:
        pass


def test_a_stall_is_logged_without_any_status_call_or_scrape(caplog: pytest.LogCaptureFixture) -> None:
    sampler = Stuck()
    loop = SamplingLoop([sampler], History(capacity=10), 0.05, stall_s=0.2)
    loop.tick()
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.loop"):
        loop.start()
        try:
            errors = wait_for(lambda: [r for r in caplog.records if r.levelno >= logging.ERROR])
            loop.sampler_states()  # a status call afterwards: still one ERROR for this stall
            assert len(errors) == 1 and "sampler gpu: sample() has not returned" in errors[0].getMessage()
            assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
        finally:
            sampler.release.set()
            loop.stop()
