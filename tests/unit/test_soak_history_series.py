"""The history's series table forgets series that no stored sample names any more. It interned every series ever
seen for the daemon's whole life: on a node whose pods each get a host interface of a new name (eni<hash>), it grew
by 6 series per pod for months (bench/daemon_soak.py --series-churn), and past MAX_SERIES no new series was kept."""

from __future__ import annotations

import pytest

from dyno.daemon.history import FORGET_AFTER_S, History, Sample, SeriesTable
from dyno.daemon.samplers.base import Reading, labels
from dyno.daemon.wire import StoredEncoder
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


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
    assert len(h.series) < 20  # it was 201 before: every device ever seen


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
