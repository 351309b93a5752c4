"""The sample history: ring bounds (sample count and byte budget) and queries, series forgotten once no stored
sample names them; the sampling loop's schedule and fault isolation."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.app import Daemon
from dyno.daemon.config import ConfigError, DaemonConfig
from dyno.daemon.history import FORGET_AFTER_S, MAX_HISTORY_BYTES, SAMPLE_OVERHEAD_BYTES, History, Sample, SeriesTable
from dyno.daemon.loop import SamplingLoop, next_deadline
from dyno.daemon.samplers.base import Reading, SamplerState, labels
from dyno.daemon.wire import StoredEncoder
from dyno.v1 import dyno_pb2

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


def _sample(t: int, *names: str) -> Sample:
    return Sample(t, tuple(Reading(n, float(t)) for n in names))


def test_ring_is_bounded_and_keeps_newest():
    h = History(capacity=5)
    for t in range(1, 1001):
        h.append(_sample(t, "a"))
    assert len(h) == 5
    assert [s.timestamp_ms for s in h.query()] == [996, 997, 998, 999, 1000]
    assert h.latest().timestamp_ms == 1000


def test_query_since_limit_and_names():
    h = History(capacity=100)
    for t in range(1, 11):
        h.append(_sample(t, "gpu_power_watts", "gpu_utilization_percent", "cpu_user_percent"))
    assert [s.timestamp_ms for s in h.query(since_ms=7)] == [8, 9, 10]
    assert [s.timestamp_ms for s in h.query(limit=2)] == [9, 10]
    assert [s.timestamp_ms for s in h.query(since_ms=7, limit=10)] == [8, 9, 10]
    got = h.query(names=["gpu_*"], limit=1)[0]
    assert {r.name for r in got.readings} == {"gpu_power_watts", "gpu_utilization_percent"}
    got = h.query(names=["cpu_user_percent"], limit=1)[0]
    assert [r.name for r in got.readings] == ["cpu_user_percent"]


def test_slow_subscriber_drops_oldest_without_blocking():
    h = History(capacity=10)
    sub = h.subscribe(maxsize=3)
    for t in range(1, 8):
        h.append(_sample(t, "a"))
    assert [sub.get(0.01).timestamp_ms for _ in range(3)] == [5, 6, 7]
    assert sub.get(0.01) is None
    sub.close()
    h.append(_sample(8, "a"))
    assert sub.get(0.01) is None


def test_next_deadline_stays_on_grid_and_skips_missed_ticks():
    assert next_deadline(100.0, 1.0, 100.3) == 101.0
    assert next_deadline(100.0, 1.0, 101.0) == 102.0
    # a 3.5 s stall: the next tick is on the original grid, not 1 s after the stall, and not three ticks at once
    assert next_deadline(100.0, 1.0, 104.5) == 105.0


class _Fake:
    def __init__(self, name, values=None, fail=False):
        self.name, self.values, self.fail = name, values or [], fail

    def state(self):
        return SamplerState(self.name, True, "fake")

    def sample(self):
        if self.fail:
            raise RuntimeError("boom")
        return self.values

    def close(self):
        pass


def test_tick_isolates_failing_sampler():
    h = History(capacity=10)
    good = _Fake("host", [Reading("cpu_user_percent", 12.5, labels(cpu="total"))])
    loop = SamplingLoop([_Fake("gpu", fail=True), good], h, 1.0, wall_clock=lambda: 1234.5)
    s = loop.tick()
    assert s.timestamp_ms == 1234500
    assert s.readings == (Reading("cpu_user_percent", 12.5, (("cpu", "total"),)),)
    assert loop.ticks == 1 and len(h) == 1


def test_loop_thread_samples_repeatedly():
    h = History(capacity=100)
    loop = SamplingLoop([_Fake("host", [Reading("x", 1.0)])], h, 0.01)
    loop.start()
    try:
        import time

        deadline = time.monotonic() + 5
        while len(h) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        loop.stop()
    assert len(h) >= 5


def test_stored_samples_share_unchanged_series_ids_and_round_trip():
    h = History(capacity=10)
    for t in (1, 2, 3):
        h.append(Sample(t, (Reading("a", float(t), labels(gpu=0)), Reading("b", 2.0 * t))))
    h.append(Sample(4, (Reading("a", 4.0, labels(gpu=0)),)))  # a series disappears
    stored = h.stored()
    assert stored[0].ids is stored[1].ids is stored[2].ids and stored[3].ids is not stored[2].ids
    assert len(h.series) == 2
    assert h.query(limit=2) == [
        Sample(3, (Reading("a", 3.0, (("gpu", "0"),)), Reading("b", 6.0))),
        Sample(4, (Reading("a", 4.0, (("gpu", "0"),)),)),
    ]
    assert h.latest() == Sample(4, (Reading("a", 4.0, labels(gpu=0)),))


def test_series_table_is_bounded(monkeypatch):
    from dyno.daemon.history import SeriesTable

    monkeypatch.setattr(SeriesTable, "MAX_SERIES", 3)
    h = History(capacity=10)
    h.append(Sample(1, tuple(Reading(f"m{i}", float(i)) for i in range(5))))
    assert len(h.series) == 3
    assert [r.name for r in h.query()[0].readings] == ["m0", "m1", "m2"]


def test_failing_sampler_is_reported_down_and_logged_once_not_every_tick(caplog):
    """A sampler raising every tick: one ERROR with the traceback, not one per tick (3600 an hour in the journal);
    its state turns unavailable (status, dyno_sampler_up 0) with the error, and recovers when it works again."""
    import logging

    h = History(capacity=10)
    bad = _Fake("gpu", fail=True)
    loop = SamplingLoop([bad, _Fake("host", [Reading("x", 1.0)])], h, 1.0)
    assert [s.ok for s in loop.sampler_states()] == [True, True]
    with caplog.at_level(logging.INFO, logger="dyno.daemon.loop"):
        for _ in range(100):
            loop.tick()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and loud[0].exc_info is not None and "gpu" in loud[0].getMessage()
    gpu, host = loop.sampler_states()
    assert not gpu.ok and "RuntimeError: boom" in gpu.reason and gpu.backend == "fake"
    assert host.ok
    caplog.clear()
    bad.fail = False
    with caplog.at_level(logging.INFO, logger="dyno.daemon.loop"):
        loop.tick()
    assert [s.ok for s in loop.sampler_states()] == [True, True]
    assert any("recovered" in r.getMessage() for r in caplog.records)


# The sample history is bounded by a byte budget as well as by its sample count


def _sample_budget(t: int, n: int, first: int = 0) -> Sample:
    return Sample(t, tuple(Reading(f"m{i}", float(t), ()) for i in range(first, first + n)))


def _recount(h: History) -> int:
    """The bytes of what the ring holds now: every sample's values and overhead, each distinct ids array once."""
    stored = h.stored()
    ids = {id(s.ids): s.ids for s in stored}
    return sum(SAMPLE_OVERHEAD_BYTES + 8 * len(s.values) for s in stored) + sum(4 * len(a) for a in ids.values())


def test_the_byte_budget_keeps_the_newest_samples_that_fit() -> None:
    cost = SAMPLE_OVERHEAD_BYTES + 8 * 100
    h = History(1000, max_bytes=50 * cost + 400)  # 50 samples of 100 values, and their one ids array (400 B)
    for t in range(1, 301):
        h.append(_sample_budget(t, 100))
        assert h.bytes_used <= h.max_bytes
    assert len(h) == 50 and [s.timestamp_ms for s in h.stored()] == list(range(251, 301))
    assert h.bytes_used == _recount(h) == 50 * cost + 400
    assert h.fitting_len() == (50 * cost + 400) // cost == 50


def test_the_sample_count_still_bounds_when_the_budget_is_large() -> None:
    h = History(10, max_bytes=1 << 30)
    for t in range(1, 26):
        h.append(_sample_budget(t, 5))
    assert len(h) == 10 and h.stored()[0].timestamp_ms == 16
    assert h.fitting_len() == 10 and h.bytes_used == _recount(h)


def test_shared_ids_arrays_are_counted_once_and_leave_with_their_last_sample() -> None:
    """The series set changes (a GPU process appears, goes): each run of samples shares one ids array."""
    h = History(1000, max_bytes=20_000)
    t = 0
    for n, first in ((10, 0), (30, 0), (10, 5), (200, 0), (10, 0)):
        for _ in range(25):
            t += 1
            h.append(_sample_budget(t, n, first))
            assert h.bytes_used == _recount(h) <= h.max_bytes
    assert h.stored()[-1].timestamp_ms == t


def test_one_sample_larger_than_the_budget_is_still_kept_alone() -> None:
    h = History(100, max_bytes=100)
    h.append(_sample_budget(1, 50))
    h.append(_sample_budget(2, 50))
    assert [s.timestamp_ms for s in h.stored()] == [2] and h.fitting_len() == 1
    assert isinstance(h.stored()[0].ids, array)


class _Wide:
    """A sampler of 500 values (8 GPUs of a real NVML host give ~300)."""

    name = "gpu"

    def state(self) -> SamplerState:
        return SamplerState(name="gpu", ok=True, backend="test")

    def sample(self) -> list[Reading]:
        return [Reading(f"v{i}", 1.0, ()) for i in range(500)]

    def close(self) -> None:
        pass


@pytest.fixture
def workdir() -> Iterator[DaemonConfig]:
    d = short_tmpdir("dyno-hb-")
    yield DaemonConfig(
        port=0,
        metrics_port=0,
        kineto_endpoint="off",
        interval_s=0.1,
        history_s=3600,  # 36,000 samples of ~4.2 KB: ~150 MB, over the (here 1 MiB) budget
        state_dir=d / "state",
        trace_dir=d / "traces",
        agent_socket=d / "agent.sock",
    )
    shutil.rmtree(d, ignore_errors=True)


def test_dynod_says_once_at_start_which_window_it_keeps(
    workdir: DaemonConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = dataclasses.replace(workdir, history_max_bytes=1 << 20)  # dynod's history_max_bytes / --history-max-bytes
    daemon = Daemon(config, samplers=[_Wide()])  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.app"):
        daemon.start()
    try:
        per_sample = SAMPLE_OVERHEAD_BYTES + 8 * 500
        kept = (1 << 20) // per_sample
        (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("history:")]
        assert line.startswith(f"history: keeping the last {kept * 0.1:g} s ({kept} samples), not history_s 3600 s")
        # 36,000 samples x 4,200 B
        assert "500 values per sample at interval_s 0.1 would take ~144 MiB, more than the history's 1 MiB" in line
        assert daemon.status().history_s == pytest.approx(kept * 0.1)  # what GetStatus and `dyno-cli status` show
    finally:
        daemon.stop(grace_s=0)


def test_no_warning_when_history_s_fits(workdir: DaemonConfig, caplog: pytest.LogCaptureFixture) -> None:
    config = dataclasses.replace(workdir, history_s=600)  # 6,000 samples of ~4.2 KB: ~25 MB, within 96 MiB
    daemon = Daemon(config, samplers=[_Wide()])  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.app"):
        daemon.start()
    try:
        assert not [r for r in caplog.records if r.getMessage().startswith("history:")]
        assert daemon.status().history_s == 600
    finally:
        daemon.stop(grace_s=0)


def test_the_budget_is_a_config_key_and_a_flag_within_bounds(tmp_path: Path) -> None:
    assert resolve([]).history_max_bytes == MAX_HISTORY_BYTES == 96 * 2**20
    assert resolve(["--history-max-bytes", str(2**30)]).history_max_bytes == 2**30
    assert resolve(["--config", config_file(tmp_path, "history_max_bytes = 2097152\n")]).history_max_bytes == 2**21
    for bad in (
        ["--history-max-bytes", "1000"],
        ["--config", config_file(tmp_path, "history_max_bytes = 100000000000\n")],
    ):
        with pytest.raises(ConfigError, match="history_max_bytes"):
            resolve(bad)


# The history's series table forgets series that no stored sample names any more


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tick(h: History, clock: Clock, t: int, devices: list[str]) -> None:
    clock.now = float(t)
    readings = [Reading("cpu_percent", float(t))]
    readings += [Reading("net_rx_bytes_per_second", float(t), labels(device=d)) for d in devices]
    h.append(Sample(t * 1000, tuple(readings)))


def _churn(h: History, clock: Clock, ticks: int, start: int = 0) -> None:
    """A new device every 10 ticks, each alive for 20."""
    for t in range(start, start + ticks):
        _tick(h, clock, t, [f"eni{n}" for n in range(max(0, t // 10 - 1), t // 10 + 1)])


def test_series_of_devices_long_gone_are_forgotten() -> None:
    clock = Clock()
    h = History(capacity=30, clock=clock)
    _churn(h, clock, 2000)  # 200 devices came and went
    named = {i for s in h.stored() for i in s.ids}
    # the ring names ~5 device series; those gone in the last FORGET_AFTER_S (+ the ring's 30 ticks) are kept too
    assert len(h.series) <= len(named) + (FORGET_AFTER_S + 30) / 10 + 2
    assert len(h.series) < 20  # not every device ever seen (201)


def test_new_series_are_still_kept_after_more_than_max_series_came_and_went(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SeriesTable, "MAX_SERIES", 40)
    clock = Clock()
    h = History(capacity=30, clock=clock)
    _churn(h, clock, 3000)  # 300 devices, far past the cap of 40 series
    latest = {h.series.key(i) for i in h.stored()[-1].ids}
    assert ("net_rx_bytes_per_second", labels(device="eni299")) in latest


def test_a_series_back_before_it_is_forgotten_keeps_its_id_and_never_takes_another_ones_name() -> None:
    clock = Clock()
    h = History(capacity=5, clock=clock)
    _tick(h, clock, 0, ["a"])
    first = h.series.id_of("net_rx_bytes_per_second", labels(device="a"))
    for t in range(1, 20):  # "a" leaves the ring, and comes back within FORGET_AFTER_S
        _tick(h, clock, t, [])
    _tick(h, clock, 20, ["a"])
    assert h.series.id_of("net_rx_bytes_per_second", labels(device="a")) == first
    for t in range(21, 21 + int(FORGET_AFTER_S) + 10):  # gone for good: forgotten
        _tick(h, clock, t, ["b"])
    assert h.series.key(first) is None
    _tick(h, clock, 200, ["a"])
    again = h.series.id_of("net_rx_bytes_per_second", labels(device="a"))
    assert again is not None and again != first  # a new id: old samples' ids never name another series
    assert h.series.key(again) == ("net_rx_bytes_per_second", labels(device="a"))


def test_get_metrics_answers_name_every_value_rightly_through_churn() -> None:
    clock = Clock()
    h = History(capacity=30, clock=clock)
    encoder = StoredEncoder(h.series)
    for start in range(0, 1500, 100):
        _churn(h, clock, 100, start)
        answer = dyno_pb2.GetMetricsResponse.FromString(encoder.response_bytes(h.stored(), "h"))
        for sample in answer.samples:
            t = sample.timestamp_ms // 1000
            devices = {m.labels["device"] for m in sample.metrics if m.name == "net_rx_bytes_per_second"}
            assert devices == {f"eni{n}" for n in range(max(0, t // 10 - 1), t // 10 + 1)}
            assert all(m.value == float(t) for m in sample.metrics)
        assert [(s.timestamp_ms, len(s.readings)) for s in h.query()] == [
            (s.timestamp_ms, len(s.metrics)) for s in answer.samples
        ]


def test_samples_held_past_their_series_being_forgotten_lose_those_values_rather_than_fail() -> None:
    clock = Clock()
    h = History(capacity=2, clock=clock)
    encoder = StoredEncoder(h.series)
    _tick(h, clock, 1, ["old"])
    held = h.stored()  # a reader's snapshot, kept (far) longer than any call lasts
    for t in range(2, int(FORGET_AFTER_S) + 10):
        _tick(h, clock, t, [])
    sample = dyno_pb2.Sample.FromString(encoder.encode(held[0]))
    assert [m.name for m in sample.metrics] == ["cpu_percent"]


def test_stored_with_a_limit_is_the_newest_of_the_selection_even_when_the_clock_went_back() -> None:
    """stored(since, limit) walks only the newest end of the ring: the same samples, in the same order, as the
    whole ring filtered (a wall clock stepped back leaves older timestamps after newer ones)."""
    h = History(100)
    for t in (10, 20, 30, 5, 40, 15, 50):
        h.append(_sample(t, "a"))
    everything = h.stored()
    for since in (0, 12, 25, 60):
        for limit in (1, 2, 3, 10):
            expected = [s for s in everything if s.timestamp_ms > since][-limit:]
            assert h.stored(since, limit) == expected
    assert [s.timestamp_ms for s in h.stored(12, 3)] == [40, 15, 50]
