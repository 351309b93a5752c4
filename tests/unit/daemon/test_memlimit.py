"""A history budget larger than the service's MemoryHigh/MemoryMax (which would OOM-kill dynod hours later, once the
history has filled): one WARNING at start names the limit and the fix."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import dyno.daemon.app as app_module
from dyno.daemon.app import Daemon
from dyno.daemon.config import DaemonConfig
from dyno.daemon.memlimit import BASELINE_BYTES, MemoryLimits, history_memory_problem, memory_limits
from dyno.daemon.samplers.host import HostSampler

pytestmark = pytest.mark.unit

MIB = 2**20


def _tree(tmp_path: Path, cgroup_line: str, files: dict[str, str]) -> tuple[Path, Path]:
    proc = tmp_path / "proc_self"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup_line)
    root = tmp_path / "cg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return proc, root


def test_cgroup_v2_limits_of_a_systemd_service(tmp_path: Path) -> None:
    proc, root = _tree(
        tmp_path,
        "0::/system.slice/dynod.service\n",
        {
            "system.slice/dynod.service/memory.high": "268435456\n",
            "system.slice/dynod.service/memory.max": "536870912\n",
        },
    )
    assert memory_limits(proc, root) == MemoryLimits(256 * MIB, 512 * MIB, "/system.slice/dynod.service")


def test_cgroup_v2_without_limits_and_v1(tmp_path: Path) -> None:
    proc, root = _tree(
        tmp_path, "0::/user.slice\n", {"user.slice/memory.max": "max\n", "user.slice/memory.high": "max"}
    )
    assert memory_limits(proc, root) == MemoryLimits(None, None, "/user.slice")
    v1 = tmp_path / "v1"
    v1.mkdir()
    proc, root = _tree(
        v1,
        "4:memory:/system.slice/dynod.service\n0::/\n",
        {"memory/system.slice/dynod.service/memory.limit_in_bytes": "134217728"},
    )
    assert memory_limits(proc, root) == MemoryLimits(None, 128 * MIB, "/system.slice/dynod.service")
    assert memory_limits(tmp_path / "nowhere", root) == MemoryLimits(None, None, "")


def test_the_problem_names_the_lowest_limit_exceeded_and_the_fix() -> None:
    unit = MemoryLimits(256 * MIB, 512 * MIB, "/system.slice/dynod.service")
    assert history_memory_problem(96 * MIB, unit) is None  # the shipped defaults fit
    high = history_memory_problem(256 * MIB, unit)
    assert high is not None and "MemoryHigh of 256 MiB" in high and "throttles" in high
    over = history_memory_problem(1024 * MIB, MemoryLimits(None, 512 * MIB, "/x"))
    assert over is not None and "MemoryMax of 512 MiB" in over and "OOM" in over and "history_max_bytes" in over
    assert history_memory_problem(2**40, MemoryLimits(None, None, "")) is None
    assert history_memory_problem(512 * MIB - BASELINE_BYTES, MemoryLimits(None, 512 * MIB, "/x")) is None


def test_dynod_warns_at_start_when_its_full_history_cannot_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(app_module, "memory_limits", lambda: MemoryLimits(256 * MIB, 512 * MIB, "/system.slice/x"))
    base = dict(
        port=0, metrics_port=0, state_dir=tmp_path / "s", trace_dir=tmp_path / "t", agent_socket=tmp_path / "a.sock",
        kineto_endpoint="off",
    )  # fmt: skip
    for config, warned in (
        (DaemonConfig(**base), False),  # the defaults: an hour at 1 s, 96 MiB budget
        (DaemonConfig(**base, history_s=1_000_000.0, history_max_bytes=2**30), True),
    ):
        caplog.clear()
        daemon = Daemon(config, samplers=[HostSampler()])
        with caplog.at_level(logging.WARNING, logger="dyno.daemon.app"):
            daemon.start()
        daemon.stop(grace_s=0)
        lines = [r.getMessage() for r in caplog.records if "this service's Memory" in r.getMessage()]
        assert len(lines) == (1 if warned else 0), lines
