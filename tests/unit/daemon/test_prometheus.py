"""The Prometheus collector's exposition, parsed by prometheus_client's own parser."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.history import History, Sample
from dyno.daemon.prometheus import DynoCollector, ExporterInfo, build_registry
from dyno.daemon.samplers.base import Reading, SamplerState, labels

pytestmark = pytest.mark.unit


def _scrape(readings, states):
    h = History(4)
    h.append(Sample(1_700_000_000_000, tuple(readings)))
    reg = build_registry(DynoCollector(h, ExporterInfo("node1", "0.1.0"), lambda: states))
    return {f.name: f for f in text_string_to_metric_families(generate_latest(reg).decode())}


def test_families_labels_and_simulated_flag():
    fams = _scrape(
        [
            Reading("gpu_power_watts", 250.0, labels(gpu=0, uuid="GPU-SIM-0")),
            Reading("gpu_power_watts", 100.0, labels(gpu=1, uuid="GPU-SIM-1")),
            Reading("cpu_user_percent", 12.5, labels(cpu="total")),
            Reading("gpu_ecc_errors_total", 3, labels(gpu=0, uuid="GPU-SIM-0", kind="corrected")),
        ],
        [SamplerState("host", True, "procfs"), SamplerState("gpu", True, "sim", simulated=True)],
    )
    power = {s.labels["gpu"]: s for s in fams["dyno_gpu_power_watts"].samples}
    assert power["0"].value == 250.0 and power["1"].value == 100.0
    assert power["0"].labels == {"gpu": "0", "uuid": "GPU-SIM-0", "host": "node1", "simulated": "true"}
    cpu = fams["dyno_cpu_user_percent"].samples[0]
    assert cpu.labels == {"cpu": "total", "host": "node1"}  # host metrics are never marked simulated
    assert fams["dyno_gpu_ecc_errors"].type == "counter"
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
