"""The DCGM-compatible exposition (`dcgm_metrics`): every exposed name is one dcgm-exporter exports by default
(tests/dcgm_reference/default-counters.csv), with that list's type and unit, dcgm-exporter's labels, and values
converted from dyno's readings into those units. Parsed with prometheus_client's OpenMetrics parser, which keeps a
counter's sample names as written."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from dyno.daemon.dcgm_view import DCGM_SERIES, LABELS
from dyno.daemon.history import History, Sample
from dyno.daemon.prometheus import DynoCollector, ExporterInfo, build_registry
from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, Reading, SamplerState, labels
from dyno.daemon.samplers.gpu_sim import SimGpuSampler

pytestmark = pytest.mark.unit

REFERENCE = Path(__file__).resolve().parents[2] / "dcgm_reference" / "default-counters.csv"


def _default_counters() -> dict[str, tuple[str, str]]:
    """name -> (type, help) of the series dcgm-exporter exports by default (the uncommented rows)."""
    rows = (r for r in csv.reader(REFERENCE.read_text().splitlines()) if r and not r[0].lstrip().startswith("#"))
    return {r[0].strip(): (r[1].strip(), ",".join(r[2:]).strip()) for r in rows if r[1].strip() != "label"}


def _unit(help_text: str) -> str:
    """The unit a dcgm-exporter help text names: "(in MiB)" -> MiB; "Ratio of ..." -> ratio; "in bytes per second"."""
    if match := re.search(r"\(in (.+?)\)", help_text):
        return match.group(1)
    if help_text.startswith("Ratio"):
        return "ratio"
    return "B/s" if "in bytes per second" in help_text else ""


def _scrape(
    readings: list[Reading],
    devices: list[GpuDevice] | None,
    hostname: str = "node1",
    holders: dict[int, tuple[str, ...]] | None = None,
) -> dict:
    h = History(4)
    h.append(Sample(1_700_000_000_000, tuple(readings)))
    states = [SamplerState("gpu", True, "sim", simulated=True)]
    dcgm = None if devices is None else (lambda: devices)
    collector = DynoCollector(
        h, ExporterInfo(hostname, "0.1.0"), lambda: states, dcgm_devices=dcgm, gpu_holders=lambda: holders or {}
    )
    text = generate_openmetrics(build_registry(collector)).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _sim() -> tuple[list[Reading], list[GpuDevice]]:
    now = [50.0]
    sim = SimGpuSampler(2, clock=lambda: now[0])
    sim.sample()
    now[0] += 1.0  # GPM-style series from the second sample on
    readings = sim.sample()
    return readings, sim.inventory()


def test_every_exposed_name_is_a_default_dcgm_exporter_series_with_its_type_and_unit() -> None:
    reference = _default_counters()
    readings, devices = _sim()
    fams = {n: f for n, f in _scrape(readings, devices).items() if n.startswith("DCGM_")}
    assert set(fams) == set(DCGM_SERIES)  # the simulator gives every one of them
    for name, family in fams.items():
        kind, help_text = reference[name]
        # the one counter is untyped: OpenMetrics has no counter without _total (dcgm_view._Untyped)
        assert family.type == (kind if kind != "counter" else "unknown"), name
        assert DCGM_SERIES[name].kind == kind, name
        assert family.documentation == help_text, name
        assert DCGM_SERIES[name].unit == _unit(help_text), name
        assert {s.name for s in family.samples} == {name}, name  # without _total, as dcgm-exporter writes it
        assert all(set(s.labels) == set(LABELS) for s in family.samples), name


def test_values_are_in_dcgm_units_with_dcgm_labels() -> None:
    gpu = labels(gpu=3, uuid="GPU-abc")
    readings = [
        Reading(gm.UTILIZATION, 87.0, gpu),
        Reading(gm.MEMORY_USED, 3 * 1024**3, gpu),
        Reading(gm.MEMORY_TOTAL, 80 * 1024**3, gpu),
        Reading(gm.ENERGY, 12.5, gpu),
        Reading(gm.TENSOR_ACTIVE, 40.0, gpu),
        Reading(gm.SM_CLOCK, 1980.0, gpu),
        Reading(gm.XID_ERRORS, 0.0, gpu),
        Reading(gm.THROTTLE_REASON_ACTIVE, 1.0, labels(gpu=3, uuid="GPU-abc", reason="sw_power_cap")),
    ]
    device = GpuDevice(3, "NVIDIA H100 80GB HBM3", "GPU-abc", 80 * 1024**3, pci_bus_id="00000000:1B:00.0")
    fams = _scrape(readings, [device], hostname="node7")

    def value(name: str) -> float:
        (sample,) = fams[name].samples
        assert sample.labels == {
            "gpu": "3",
            "UUID": "GPU-abc",
            "pci_bus_id": "00000000:1B:00.0",
            "device": "nvidia3",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": "node7",
            "hpc_job": "",  # no job holds it
        }
        return sample.value

    assert value("DCGM_FI_DEV_GPU_UTIL") == 87.0  # a percentage, as in DCGM
    assert value("DCGM_FI_DEV_FB_USED") == 3 * 1024  # MiB
    assert value("DCGM_FI_DEV_FB_FREE") == 77 * 1024
    assert value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == 12500.0  # mJ
    assert value("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == 0.40  # a ratio
    assert value("DCGM_FI_DEV_SM_CLOCK") == 1980.0  # MHz
    assert value("DCGM_FI_DEV_XID_ERRORS") == 0.0  # DCGM's "no XID yet"
    assert "DCGM_FI_DEV_POWER_USAGE" not in fams  # no reading, no series
    assert fams["dyno_gpu_utilization_ratio"].samples[0].value == 0.87  # dyno's own series stay


def test_off_unless_asked_for_and_simulated_gpus_say_so() -> None:
    readings, devices = _sim()
    assert not any(n.startswith("DCGM_") for n in _scrape(readings, None))
    fams = _scrape(readings, devices)
    for sample in fams["DCGM_FI_DEV_GPU_UTIL"].samples:
        assert sample.labels["modelName"].endswith("(simulated)") and sample.labels["UUID"].startswith("GPU-SIM-")
    assert all(s.labels["simulated"] == "true" for s in fams["dyno_gpu_utilization_ratio"].samples)


def test_hpc_job_is_the_job_holding_the_gpu_one_series_per_job_and_empty_when_none() -> None:
    readings, devices = _sim()
    families = _scrape(readings, devices, holders={0: ("job-a", "job-b")})
    util = [(s.labels["gpu"], s.labels["hpc_job"], s.value) for s in families["DCGM_FI_DEV_GPU_UTIL"].samples]
    by_gpu0 = [u for u in util if u[0] == "0"]
    assert sorted(u[1] for u in by_gpu0) == ["job-a", "job-b"]  # as dcgm-exporter: each series once per job
    assert by_gpu0[0][2] == by_gpu0[1][2]  # the same reading under each job
    assert [u[1] for u in util if u[0] == "1"] == [""]  # no job holds GPU 1
    energy = families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"].samples
    assert sorted(s.labels["hpc_job"] for s in energy if s.labels["gpu"] == "0") == ["job-a", "job-b"]
