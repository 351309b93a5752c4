"""What dynod's start-up log says about GPUs: one line per problem, and a flag that cannot act says so."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_sim_gpus_without_the_sim_backend_is_a_warning_not_silence(dynod_factory) -> None:
    """`dynod --sim-gpus 4` (forgetting --gpu-backend sim) started with NVML unavailable and no simulated GPU, and
    nothing said that the flag had no effect."""
    d = dynod_factory(gpu_backend="auto", sim_gpus=3, metrics=False)  # conftest passes --sim-gpus 3
    lines = [line for line in d.lines if "--sim-gpus" in line]
    assert len(lines) == 1 and "WARNING" in lines[0], d.log
    assert "--sim-gpus 3 is ignored: gpu_backend auto never simulates; simulated GPUs need --gpu-backend" in lines[0]


def test_sim_gpus_with_gpus_disabled_on_purpose_is_no_warning(dynod_factory) -> None:
    d = dynod_factory(gpu_backend="none", sim_gpus=3, metrics=False)
    assert "--sim-gpus" not in d.log


def test_sim_gpus_with_the_sim_backend_is_no_warning(dynod_factory) -> None:
    d = dynod_factory(gpu_backend="sim", sim_gpus=2, metrics=False)
    assert "--sim-gpus" not in d.log and "simulated" in d.log


def test_nvml_unavailable_is_one_line(dynod_factory) -> None:
    """Without a driver (this host), NVML's reason was logged twice: INFO by the GPU sampler, then WARNING by the
    daemon ("sampler gpu: unavailable: ...")."""
    pytest.importorskip("pynvml")
    d = dynod_factory(gpu_backend="auto", metrics=False)
    start = d.log.split(" ready: ", 1)[0]
    if "sampler gpu: ok" in start:
        pytest.skip("this host has a working NVML")
    reason_lines = [line for line in start.splitlines() if "NVML" in line]
    assert len(reason_lines) == 1 and "WARNING" in reason_lines[0] and "sampler gpu: unavailable" in reason_lines[0]
