"""Simulated GPUs: same metric names as the real sampler, labelled simulated, plausible and smooth values."""

from __future__ import annotations

import pytest

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import Reading, Sampler
from dyno.daemon.samplers.gpu import make_gpu_sampler
from dyno.daemon.samplers.gpu_sim import SimGpuSampler

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.t = 500.0

    def __call__(self) -> float:
        return self.t


def series(readings: list[Reading], name: str) -> dict[str, float]:
    """gpu index -> value of `name` (readings without a reason label)."""
    return {dict(r.labels)["gpu"]: r.value for r in readings if r.name == name}


def test_state_inventory_and_labels_say_simulated() -> None:
    sampler = make_gpu_sampler("sim", sim_gpus=3, clock=Clock())
    assert isinstance(sampler, SimGpuSampler) and isinstance(sampler, Sampler)
    state = sampler.state()
    assert state.ok and state.simulated and state.backend == "sim"
    inv = sampler.inventory()
    assert [d.index for d in inv] == [0, 1, 2]
    assert all(d.simulated and d.uuid.startswith("GPU-SIM-") and "simulated" in d.name for d in inv)
    assert len({d.uuid for d in inv}) == 3
    assert sampler.processes() == []
    readings = sampler.sample()
    assert readings and all(dict(r.labels).get("simulated") == "true" for r in readings)
    assert {dict(r.labels)["uuid"] for r in readings} == {d.uuid for d in inv}


def test_emits_every_gauge_of_the_real_sampler() -> None:
    readings = SimGpuSampler(2, seed=1, clock=Clock()).sample()
    names = {r.name for r in readings}
    # LAST_XID only appears after an XID happened, which the simulator never fakes
    assert names == (gm.GAUGE_METRICS | gm.COUNTER_METRICS) - {gm.LAST_XID}
    per_gpu = [r for r in readings if dict(r.labels)["gpu"] == "0" and r.name != gm.THROTTLE_REASON_ACTIVE]
    assert len(per_gpu) == len({r.name for r in per_gpu})  # one value per metric per GPU
    reasons = {dict(r.labels)["reason"] for r in readings if r.name == gm.THROTTLE_REASON_ACTIVE}
    assert reasons == set(gm.THROTTLE_REASON_BITS)


def test_values_are_plausible_and_vary_smoothly_over_time() -> None:
    clock = Clock()
    sampler = SimGpuSampler(4, seed=7, clock=clock)
    util_history: list[dict[str, float]] = []
    for _ in range(300):
        readings = sampler.sample()
        for name, low, high in (
            (gm.UTILIZATION, 0, 100),
            (gm.SM_ACTIVE, 0, 100),
            (gm.SM_OCCUPANCY, 0, 100),
            (gm.TENSOR_ACTIVE, 0, 100),
            (gm.DRAM_ACTIVE, 0, 100),
            (gm.POWER, 50, 700),
            (gm.TEMPERATURE, 25, 85),
            (gm.SM_CLOCK, 300, 2000),
        ):
            assert all(low <= v <= high for v in series(readings, name).values()), name
        used, total = series(readings, gm.MEMORY_USED), series(readings, gm.MEMORY_TOTAL)
        assert all(0 < used[g] < total[g] for g in used)
        util_history.append(series(readings, gm.UTILIZATION))
        clock.t += 1.0
    for gpu in ("0", "1", "2", "3"):
        values = [h[gpu] for h in util_history]
        assert max(values) - min(values) > 20  # it varies ...
        assert max(abs(a - b) for a, b in zip(values, values[1:], strict=False)) <= 10  # ... smoothly at 1 s
    # GPUs are not copies of each other
    assert len({tuple(h[g] for h in util_history[:50]) for g in ("0", "1", "2", "3")}) == 4


def test_energy_integrates_power() -> None:
    clock = Clock()
    sampler = SimGpuSampler(1, clock=clock)
    assert series(sampler.sample(), gm.ENERGY)["0"] == 0.0
    clock.t += 2.0
    readings = sampler.sample()
    assert series(readings, gm.ENERGY)["0"] == pytest.approx(2.0 * series(readings, gm.POWER)["0"])


def test_deterministic_for_seed_and_clock() -> None:
    a = SimGpuSampler(2, seed=3, clock=Clock()).sample()
    b = SimGpuSampler(2, seed=3, clock=Clock()).sample()
    c = SimGpuSampler(2, seed=4, clock=Clock()).sample()
    assert a == b
    assert series(a, gm.UTILIZATION) != series(c, gm.UTILIZATION) or series(a, gm.POWER) != series(c, gm.POWER)


@pytest.mark.parametrize("n", [0, -1, 10_000])
def test_rejects_bad_gpu_count(n: int) -> None:
    with pytest.raises(ValueError, match="sim_gpus"):
        SimGpuSampler(n)
