"""`dyno-cli status` text: a simulated GPU is labelled once, whether or not its name already says so."""

from __future__ import annotations

import pytest

from dyno.client.commands.status import render
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", ["NVIDIA H100 80GB HBM3 (simulated)", "Sim GPU"])
def test_a_simulated_gpu_is_labelled_once(name: str) -> None:
    status = dyno_pb2.Status(gpus=[dyno_pb2.GpuInfo(index=0, name=name, uuid="GPU-SIM-0", simulated=True)])
    line = next(ln for ln in render(status, "localhost:1778").splitlines() if "GPU-SIM-0" in ln)
    assert line.lower().count("simulated") == 1


def test_a_real_gpu_is_not_labelled() -> None:
    status = dyno_pb2.Status(gpus=[dyno_pb2.GpuInfo(index=0, name="NVIDIA A100", uuid="GPU-1")])
    line = next(ln for ln in render(status, "localhost:1778").splitlines() if "GPU-1" in ln)
    assert "simulated" not in line.lower()
