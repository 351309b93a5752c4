"""History ring bounds and queries; the sampling loop's schedule and fault isolation."""

from __future__ import annotations

import pytest

from dyno.daemon.history import History, Sample
from dyno.daemon.loop import SamplingLoop, next_deadline
from dyno.daemon.samplers.base import Reading, SamplerState, labels

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
