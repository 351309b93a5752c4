"""The sampling loop after a priming tick: dynod takes one sample before starting the loop (rate counters primed,
data for the first queries); the loop's first tick comes one interval later, not at once; a priming sample that
never returns is caught by the stall watchdog."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import socket
import threading
from pathlib import Path

import pytest

import dyno.daemon.app as app_module
from dyno.daemon.app import Daemon
from dyno.daemon.config import DaemonConfig
from dyno.daemon.history import History
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.main import main
from dyno.daemon.samplers.base import Reading, SamplerState

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


class _Counting:
    name = "host"

    def __init__(self) -> None:
        self.calls = 0
        self.second = threading.Event()

    def state(self) -> SamplerState:
        return SamplerState(self.name, True, "fake")

    def sample(self) -> list[Reading]:
        self.calls += 1
        if self.calls >= 2:
            self.second.set()
        return [Reading("x", float(self.calls))]

    def close(self) -> None:
        pass


def test_the_loop_does_not_tick_again_right_after_a_priming_tick() -> None:
    """Two samples ~10 ms apart would make the second one's rates (CPU %, network, disk, GPU GPM) deltas over
    ~10 ms."""
    sampler = _Counting()
    loop = SamplingLoop([sampler], History(capacity=10), interval_s=3600.0)
    loop.tick()
    loop.start()
    try:
        assert not sampler.second.wait(0.5)  # the loop's own first tick is not within milliseconds
    finally:
        loop.stop()
    assert sampler.calls == 1 and loop.ticks == 1


def test_without_a_priming_tick_the_loop_samples_at_once() -> None:
    sampler = _Counting()
    loop = SamplingLoop([sampler], History(capacity=10), interval_s=0.05)
    loop.start()
    try:
        assert sampler.second.wait(10)
    finally:
        loop.stop()
    assert loop.ticks >= 2


# dynod's first sample (the "priming" tick before the loop runs) under the stall watchdog


STALL_S = 0.5


class HungFirst:
    """A sampler whose first sample() hangs until released (a GPU that fell off the bus at dynod's start)."""

    def __init__(self, name: str = "gpu", hang: bool = True) -> None:
        self.name = name
        self.hang = hang
        self.release = threading.Event()
        self.calls = 0
        self.closed = False

    def state(self) -> SamplerState:
        return SamplerState(self.name, True, "fake")

    def sample(self) -> list[Reading]:
        self.calls += 1
        if self.hang and self.calls == 1:
            self.release.wait(20)
        return [Reading(f"{self.name}_value", 1.0)]

    def close(self) -> None:
        self.closed = True


def _config(d: Path) -> DaemonConfig:
    return DaemonConfig(
        port=0, metrics_port=0, interval_s=0.1, state_dir=d / "s", trace_dir=d / "t", agent_socket=d / "a.sock",
        kineto_endpoint="off",
    )  # fmt: skip


def test_prime_returns_at_once_when_the_first_sample_is_quick() -> None:
    sampler = HungFirst("host", hang=False)
    seen = threading.Event()
    loop = SamplingLoop([sampler], History(capacity=10), 3600.0, stall_s=STALL_S)
    try:
        assert loop.prime(on_first_tick=seen.set)
        assert seen.wait(5) and loop.ticks == 1 and sampler.calls == 1
    finally:
        loop.stop()


def test_a_hung_first_sample_is_logged_naming_the_sampler_and_start_up_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = short_tmpdir("dyno-prime-")
    host, gpu = HungFirst("host", hang=False), HungFirst("gpu")
    daemon = Daemon(_config(d), samplers=[host, gpu])
    daemon.loop = SamplingLoop(daemon.samplers, daemon.history, 0.1, stall_s=STALL_S)
    starter = threading.Thread(target=daemon.start, daemon=True)
    try:
        with caplog.at_level(logging.WARNING):
            starter.start()
            starter.join(10)
            assert not starter.is_alive(), "Daemon.start() hung on the first sample"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("sampler gpu: the first sample has not returned" in m for m in warnings), warnings
        # the watchdog's ERROR for the stall, as for any stall of the running loop: its thread's next look (every
        # stall_s / 4) may come after start() returned, later still on a loaded machine
        wait_for(lambda: any("sampler gpu: sample() has not returned" in r.getMessage() for r in caplog.records), 20)
        states = {s.name: s for s in daemon.status().samplers}
        assert not states["gpu"].ok and "stalled" in states["gpu"].reason
        assert daemon.port > 0  # serving
        stopper = threading.Thread(target=daemon.stop, kwargs={"grace_s": 0}, daemon=True)
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), "Daemon.stop() hung on the first sample"
        assert host.closed and not gpu.closed  # its close() would wait on the same hung call
    finally:
        gpu.release.set()
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)


def test_the_history_checks_run_once_the_late_first_sample_arrives(caplog: pytest.LogCaptureFixture) -> None:
    """The start-up warnings that need a first sample (history cut by its byte budget) come when it does."""
    d = short_tmpdir("dyno-prime-")
    gpu = HungFirst("gpu")
    daemon = Daemon(_config(d), samplers=[gpu])
    daemon.loop = SamplingLoop(daemon.samplers, daemon.history, 0.1, stall_s=STALL_S)
    checked = threading.Event()
    daemon._first_sample_checks = checked.set  # type: ignore[method-assign]
    try:
        daemon.start()
        assert not checked.is_set()
        gpu.release.set()
        assert checked.wait(10)
        wait_for(lambda: len(daemon.history) >= 1)
    finally:
        gpu.release.set()
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)


def test_dynod_tells_systemd_it_is_ready_and_stops_on_sigterm_while_the_first_sample_hangs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    d = short_tmpdir("dyno-prime-")
    gpu = HungFirst("gpu")
    monkeypatch.setattr(app_module, "make_gpu_sampler", lambda *a: gpu)
    monkeypatch.setattr(app_module, "SamplingLoop", functools.partial(SamplingLoop, stall_s=STALL_S))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(d / "notify"))
    notify.settimeout(10)
    monkeypatch.setenv("NOTIFY_SOCKET", str(d / "notify"))
    got: list[bytes] = []

    def systemd() -> None:  # READY=1, then `systemctl stop` (or its timeout: TimeoutStartSec)
        try:
            got.append(notify.recv(256))
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            got.append(notify.recv(256))
        except OSError:
            pass

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    watcher = threading.Thread(target=systemd, daemon=True)
    watcher.start()
    args = ["--port", "0", "--metrics-port", "0", "--kineto-endpoint", "off", "--interval-s", "0.1"]
    args += ["--state-dir", str(d / "s"), "--trace-dir", str(d / "t"), "--agent-socket", str(d / "a.sock")]
    try:
        with caplog.at_level(logging.WARNING):
            rc = main(args)
        watcher.join(10)
        assert rc == 0
        assert got[:2] == [b"READY=1", b"STOPPING=1"]
        assert any("sampler gpu: the first sample has not returned" in r.getMessage() for r in caplog.records)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        gpu.release.set()
        notify.close()
        shutil.rmtree(d, ignore_errors=True)
