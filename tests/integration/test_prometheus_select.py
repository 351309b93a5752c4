"""dynod's Prometheus endpoint selects families with `name[]=` (docs/METRICS.md), as prometheus_client's own server
does, although dynod's collector describes nothing when registered (its families come and go with the samplers),
which is where prometheus_client looks the names up. A real dynod; its answers parsed with prometheus_client's text
parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import wait_for

pytestmark = pytest.mark.integration


def _scrape(url: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_name_selects_those_families_only(dynod) -> None:
    wait_for(lambda: "dyno_load_average_1m" in _scrape(dynod.metrics_url))
    url = dynod.metrics_url + "?name%5B%5D=dyno_load_average_1m&name%5B%5D=dyno_gpu_xid_errors_total"
    got = _scrape(url)
    assert set(got) == {"dyno_load_average_1m", "dyno_gpu_xid_errors"}  # the parser names a counter without _total
    assert [s[0] for s in got["dyno_gpu_xid_errors"]] == ["dyno_gpu_xid_errors_total"] * 2  # 2 simulated GPUs
    assert all(s[1]["simulated"] == "true" for s in got["dyno_gpu_xid_errors"])
    info = _scrape(dynod.metrics_url + "?name[]=dyno_build_info")
    assert list(info) == ["dyno_build_info"] and info["dyno_build_info"][0][2] == 1.0


def test_an_unknown_name_selects_nothing_and_no_name_everything(dynod) -> None:
    assert _scrape(dynod.metrics_url + "?name[]=dyno_no_such_metric") == {}
    assert len(_scrape(dynod.metrics_url)) > 20
