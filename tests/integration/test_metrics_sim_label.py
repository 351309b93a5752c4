"""`dyno-cli metrics` across hosts: the GPU table labels a simulated daemon's GPUs (`--gpu-backend sim`)
"0 (simulated)", as every other view does (status: "(simulated)", --names and Prometheus: simulated="true"). A real
dynod with the simulated backend."""

from __future__ import annotations

import pytest

from conftest import dead_target, run_cli, wait_for

pytestmark = pytest.mark.integration


def _gpu_table(stdout: str) -> list[list[str]]:
    block = stdout.strip().split("\n\n")[0].splitlines()
    assert block[0].split()[:2] == ["HOST", "GPU"], stdout
    return [line.split() for line in block[2:]]


def test_simulated_gpus_are_labelled_in_the_fleet_table(dynod) -> None:
    dead = dead_target()
    wait_for(lambda: "UTIL" in run_cli("metrics", "--hosts", f"{dynod.target},{dead}", "--timeout-s", "2").stdout)
    r = run_cli("metrics", "--hosts", f"{dynod.target},{dead}", "--timeout-s", "2")
    assert r.returncode == 3, r.stderr
    rows = _gpu_table(r.stdout)
    assert [row[:3] for row in rows] == [[dynod.target, "0", "(simulated)"], [dynod.target, "1", "(simulated)"]]
