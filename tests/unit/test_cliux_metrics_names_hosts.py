"""`dyno-cli metrics --hosts A,B --names 'net_*'` shows the metrics asked for. Before: the multi-host view always drew
its fixed GPU and host tables, so net_* (or any metric outside their columns) came out as rows of dashes, and a
pattern matching nothing gave the same dashes instead of saying so."""

from __future__ import annotations

import pytest

from dyno.client.cluster import HostResult
from dyno.client.commands.metrics import render_selected
from dyno.client.hosts import Host
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _answer(*metrics: tuple[str, dict[str, str], float]) -> dyno_pb2.GetMetricsResponse:
    sample = dyno_pb2.Sample(timestamp_ms=1)
    for name, labels, value in metrics:
        sample.metrics.add(name=name, labels=labels, value=value)
    return dyno_pb2.GetMetricsResponse(hostname="h", samples=[sample])


def test_the_matched_metrics_are_the_columns() -> None:
    results = [
        HostResult(Host("a", 1778), True, _answer(("net_rx_bytes_per_second", {"device": "eth0"}, 2048.0))),
        HostResult(Host("b", 1778), True, _answer(("net_rx_bytes_per_second", {"device": "ib0"}, 1024.0))),
        HostResult(Host("c", 1778), False, error="down", error_type="Unavailable"),
    ]
    lines = render_selected(results, ["net_*"]).splitlines()
    assert lines[0].split() == ["HOST", "ENTITY", "net_rx_bytes_per_second"]
    assert lines[2].split() == ["a:1778", "device=eth0", "2.0", "KiB/s"]
    assert lines[3].split() == ["b:1778", "device=ib0", "1.0", "KiB/s"]
    assert lines[4].split() == ["c:1778", "Unavailable", "-"]


def test_nothing_matched_says_so() -> None:
    results = [HostResult(Host(n, 1778), True, _answer()) for n in ("a", "b")]
    assert render_selected(results, ["nosuch*"]) == "no metric matches nosuch* on 2 host(s)"
