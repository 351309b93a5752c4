"""A sampler whose sample() never returns (NVML on a GPU that fell off the bus, a wedged driver) stops the whole
sampling loop: the watchdog marks the samplers down (status, dyno_sampler_up 0) and logs it, so the documented alert
on dyno_sampler_up fires and stale values are not exported as current."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.app import Daemon
from dyno.daemon.config import DaemonConfig
from dyno.daemon.history import History
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.prometheus import DynoCollector, ExporterInfo, build_registry
from dyno.daemon.samplers.base import Reading, SamplerState

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

STALL_S = 0.3


_READING = {"host": "load_average_1m", "gpu": "gpu_power_watts"}  # one exported series per fake sampler


class Hanging:
    """Answers its first `good` calls, then blocks in sample() until released."""

    def __init__(self, name: str, good: int = 1) -> None:
        self.name = name
        self.good = good
        self.calls = 0
        self.release = threading.Event()
        self.closed = False

    def state(self) -> SamplerState:
        return SamplerState(self.name, True, "fake")

    def sample(self) -> list[Reading]:
        self.calls += 1
        if self.calls > self.good:
            self.release.wait(30)
        return [Reading(_READING[self.name], float(self.calls))]

    def close(self) -> None:
        if self.calls > self.good:  # stuck: like nvmlShutdown on a wedged driver
            self.release.wait(30)
        self.closed = True


@pytest.fixture
def stuck_loop() -> Iterator[tuple[SamplingLoop, Hanging, History]]:
    gpu, host = Hanging("gpu"), Hanging("host", good=10**9)
    history = History(capacity=100)
    loop = SamplingLoop([host, gpu], history, 0.05, stall_s=STALL_S)
    loop.tick()
    loop.start()
    yield loop, gpu, history
    gpu.release.set()
    loop.stop()


def _exported(history: History, loop: SamplingLoop) -> set[str]:
    collector = DynoCollector(
        history, ExporterInfo("h", "0"), loop.sampler_states, stalled=lambda: loop.stall() is not None
    )
    text = generate_latest(build_registry(collector)).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_stuck_sampler_turns_every_sampler_down_with_the_reason_and_is_logged_once(
    stuck_loop: tuple[SamplingLoop, Hanging, History], caplog: pytest.LogCaptureFixture
) -> None:
    loop, gpu, history = stuck_loop
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.loop"):
        stall = wait_for(loop.stall)
        assert stall.sampler == "gpu" and stall.seconds > STALL_S
        for _ in range(5):  # status calls and scrapes: one ERROR, not one per call
            host, gpu_state = loop.sampler_states()
    assert not host.ok and host.reason.startswith("not sampled for ") and "sampler gpu has stalled" in host.reason
    assert not gpu_state.ok and gpu_state.reason.startswith("sampling stalled: sample() has not returned for ")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "sampler gpu" in errors[0].getMessage()
    # the newest sample's values are not exported as current ones; sampler_up and the timestamp still are
    names = _exported(history, loop)
    assert "dyno_load_average_1m" not in names and "dyno_gpu_power_watts" not in names
    assert {"dyno_sampler_up", "dyno_last_sample_timestamp_seconds", "dyno_build_info"} <= names

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.loop"):
        gpu.release.set()
        wait_for(lambda: loop.stall() is None and all(s.ok for s in loop.sampler_states()))
    assert any("sample() returned after" in r.getMessage() for r in caplog.records)
    assert {"dyno_load_average_1m", "dyno_gpu_power_watts"} <= _exported(history, loop)


def test_a_sampler_that_is_only_slow_is_not_a_stall() -> None:
    loop = SamplingLoop([Hanging("gpu", good=10**9)], History(capacity=10), 1.0, stall_s=STALL_S)
    loop.tick()
    assert loop.stall() is None and [s.ok for s in loop.sampler_states()] == [True]


def test_dynod_stops_promptly_when_a_sampler_is_stuck() -> None:
    """SIGTERM must still end dynod: it neither waits for the stuck sampling thread nor calls the stuck sampler's
    close() (nvmlShutdown would block on the same driver); the other samplers are closed as ever."""
    d = short_tmpdir("dyno-stall-")
    config = DaemonConfig(
        port=0, metrics_port=0, interval_s=0.1, state_dir=d / "s", trace_dir=d / "t", agent_socket=d / "a.sock",
        kineto_endpoint="off",
    )  # fmt: skip
    gpu, host = Hanging("gpu"), Hanging("host", good=10**9)
    daemon = Daemon(config, samplers=[host, gpu])
    daemon.loop = SamplingLoop(daemon.samplers, daemon.history, config.interval_s, stall_s=STALL_S)
    try:
        daemon.start()
        wait_for(daemon.loop.stall)
        assert [s.ok for s in daemon.status().samplers] == [False, False]
        stopper = threading.Thread(target=daemon.stop, kwargs={"grace_s": 0})
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), "Daemon.stop() hung on the stuck sampler"
        assert host.closed and not gpu.closed
    finally:
        gpu.release.set()
        shutil.rmtree(d, ignore_errors=True)


# A sampler stuck in sample() is logged (one ERROR) when the stall happens, not at the next status call or Prometheus
# scrape


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
