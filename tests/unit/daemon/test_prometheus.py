"""The Prometheus collector's exposition, parsed by prometheus_client's own parser."""

from __future__ import annotations

import re

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.history import History, Sample
from dyno.daemon.prom_series import RATE_READINGS, SERIES
from dyno.daemon.prometheus import DynoCollector, ExporterInfo, build_registry
from dyno.daemon.samplers import gpu_metrics
from dyno.daemon.samplers.base import Reading, SamplerState, labels

pytestmark = pytest.mark.unit


def _scrape(readings, states, totals=()):
    h = History(4)
    h.append(Sample(1_700_000_000_000, tuple(readings)))
    reg = build_registry(DynoCollector(h, ExporterInfo("node1", "0.1.0"), lambda: states, totals=lambda: totals))
    return {f.name: f for f in text_string_to_metric_families(generate_latest(reg).decode())}


def test_families_labels_and_simulated_flag():
    fams = _scrape(
        [
            Reading("gpu_power_watts", 250.0, labels(gpu=0, uuid="GPU-SIM-0")),
            Reading("gpu_power_watts", 100.0, labels(gpu=1, uuid="GPU-SIM-1")),
            Reading("load_average_1m", 12.5),
            Reading("gpu_ecc_corrected_errors", 3, labels(gpu=0, uuid="GPU-SIM-0")),
        ],
        [SamplerState("host", True, "procfs"), SamplerState("gpu", True, "sim", simulated=True)],
    )
    power = {s.labels["gpu"]: s for s in fams["dyno_gpu_power_watts"].samples}
    assert power["0"].value == 250.0 and power["1"].value == 100.0
    assert power["0"].labels == {"gpu": "0", "uuid": "GPU-SIM-0", "host": "node1", "simulated": "true"}
    load = fams["dyno_load_average_1m"].samples[0]
    assert load.labels == {"host": "node1"}  # host metrics are never marked simulated
    assert fams["dyno_gpu_ecc_corrected_errors"].type == "counter"
    assert fams["dyno_last_sample_timestamp_seconds"].samples[0].value == 1_700_000_000.0
    assert {s.labels["sampler"]: s.value for s in fams["dyno_sampler_up"].samples} == {"host": 1.0, "gpu": 1.0}
    assert fams["dyno_build_info"].samples[0].labels["version"] == "0.1.0"


def test_real_gpu_not_marked_simulated_and_unavailable_sampler_is_zero():
    fams = _scrape(
        [Reading("gpu_power_watts", 250.0, labels(gpu=0, uuid="GPU-abc"))],
        [SamplerState("gpu", True, "nvml"), SamplerState("host", False, "procfs", reason="no /proc")],
    )
    assert "simulated" not in fams["dyno_gpu_power_watts"].samples[0].labels
    assert {s.labels["sampler"]: s.value for s in fams["dyno_sampler_up"].samples} == {"gpu": 1.0, "host": 0.0}


def test_rates_are_not_exported_their_counters_are():
    cpu0 = labels(cpu="0", mode="user")
    fams = _scrape(
        [
            Reading("cpu_user_percent", 12.5, labels(cpu="total")),
            Reading("cpu_user_percent", 12.5, labels(cpu="0")),
            Reading("net_rx_bytes_per_second", 1e6, labels(device="eth0")),
            Reading("disk_busy_percent", 50.0, labels(device="sda")),
        ],
        [SamplerState("host", True, "procfs")],
        totals=[Reading("cpu_seconds", 12.5, cpu0), Reading("net_rx_bytes", 4e9, labels(device="eth0"))],
    )
    assert not any(name.endswith(("_percent", "_per_second")) for name in fams)
    cpu = fams["dyno_cpu_seconds"]
    assert cpu.type == "counter" and [(s.name, s.labels, s.value) for s in cpu.samples] == [
        ("dyno_cpu_seconds_total", {"cpu": "0", "mode": "user", "host": "node1"}, 12.5)
    ]
    assert fams["dyno_net_rx_bytes"].samples[0].value == 4e9


def test_percentages_are_ratios_and_clocks_hertz_with_helps_saying_what_they_are():
    gpu = labels(gpu=0, uuid="GPU-abc")
    fams = _scrape(
        [
            Reading("memory_used_percent", 25.0),
            Reading("gpu_utilization_percent", 57.0, gpu),
            Reading("gpu_tensor_active_percent", 40.0, gpu),
            Reading("gpu_sm_clock_mhz", 1980.0, gpu),
        ],
        [SamplerState("gpu", True, "nvml")],
    )
    assert fams["dyno_memory_used_ratio"].samples[0].value == 0.25
    assert fams["dyno_gpu_utilization_ratio"].samples[0].value == 0.57  # 57 * 0.01 is 0.5700000000000001
    assert fams["dyno_gpu_tensor_active_ratio"].samples[0].value == 0.40
    assert fams["dyno_gpu_sm_clock_hertz"].samples[0].value == 1.98e9
    assert all("see docs" not in f.documentation and f.documentation for f in fams.values())


def test_every_sampled_name_is_exported_or_replaced_by_a_counter():
    host = {"cpu_user_percent", "memory_used_bytes", "net_rx_bytes_per_second", "host_uptime_seconds"}
    for name in host | gpu_metrics.GAUGE_METRICS | gpu_metrics.COUNTER_METRICS:
        assert (name in SERIES) != (name in RATE_READINGS), name
    for query in RATE_READINGS.values():  # each names counters that are exported
        for counter in re.findall(r"(\w+)_total", query):
            assert SERIES[counter].kind == "counter", counter
    for series in SERIES.values():
        assert not series.name.endswith(("_percent", "_mhz", "_total")), series.name
