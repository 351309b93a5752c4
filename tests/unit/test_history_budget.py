"""The sample history is bounded by a byte budget as well as by its sample count: at interval_s 0.1 an hour takes ten
times the memory of 1 s, and history_s / interval_s may be 1,000,000 samples (~2 GB), far past the unit's
MemoryMax. Past the budget the oldest samples go; dynod says once at start what window it keeps."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.app import Daemon
from dyno.daemon.config import ConfigError, DaemonConfig
from dyno.daemon.history import MAX_HISTORY_BYTES, SAMPLE_OVERHEAD_BYTES, History, Sample
from dyno.daemon.samplers.base import Reading, SamplerState

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


def _sample(t: int, n: int, first: int = 0) -> Sample:
    return Sample(t, tuple(Reading(f"m{i}", float(t), ()) for i in range(first, first + n)))


def _recount(h: History) -> int:
    """The bytes of what the ring holds now: every sample's values and overhead, each distinct ids array once."""
    stored = h.stored()
    ids = {id(s.ids): s.ids for s in stored}
    return sum(SAMPLE_OVERHEAD_BYTES + 8 * len(s.values) for s in stored) + sum(4 * len(a) for a in ids.values())


def test_the_byte_budget_keeps_the_newest_samples_that_fit() -> None:
    cost = SAMPLE_OVERHEAD_BYTES + 8 * 100
    h = History(1000, max_bytes=50 * cost + 400)  # 50 samples of 100 values, and their one ids array (400 B)
    for t in range(1, 301):
        h.append(_sample(t, 100))
        assert h.bytes_used <= h.max_bytes
    assert len(h) == 50 and [s.timestamp_ms for s in h.stored()] == list(range(251, 301))
    assert h.bytes_used == _recount(h) == 50 * cost + 400
    assert h.fitting_len() == (50 * cost + 400) // cost == 50


def test_the_sample_count_still_bounds_when_the_budget_is_large() -> None:
    h = History(10, max_bytes=1 << 30)
    for t in range(1, 26):
        h.append(_sample(t, 5))
    assert len(h) == 10 and h.stored()[0].timestamp_ms == 16
    assert h.fitting_len() == 10 and h.bytes_used == _recount(h)


def test_shared_ids_arrays_are_counted_once_and_leave_with_their_last_sample() -> None:
    """The series set changes (a GPU process appears, goes): each run of samples shares one ids array."""
    h = History(1000, max_bytes=20_000)
    t = 0
    for n, first in ((10, 0), (30, 0), (10, 5), (200, 0), (10, 0)):
        for _ in range(25):
            t += 1
            h.append(_sample(t, n, first))
            assert h.bytes_used == _recount(h) <= h.max_bytes
    assert h.stored()[-1].timestamp_ms == t


def test_one_sample_larger_than_the_budget_is_still_kept_alone() -> None:
    h = History(100, max_bytes=100)
    h.append(_sample(1, 50))
    h.append(_sample(2, 50))
    assert [s.timestamp_ms for s in h.stored()] == [2] and h.fitting_len() == 1
    assert isinstance(h.stored()[0].ids, array)


class _Wide:
    """A sampler of 500 values (8 GPUs of a real NVML host give ~300)."""

    name = "gpu"

    def state(self) -> SamplerState:
        return SamplerState(name="gpu", ok=True, backend="test")

    def sample(self) -> list[Reading]:
        return [Reading(f"v{i}", 1.0, ()) for i in range(500)]

    def close(self) -> None:
        pass


@pytest.fixture
def workdir() -> Iterator[DaemonConfig]:
    d = short_tmpdir("dyno-hb-")
    yield DaemonConfig(
        port=0,
        metrics_port=0,
        kineto_endpoint="off",
        interval_s=0.1,
        history_s=3600,  # 36,000 samples of ~4.2 KB: ~150 MB, over the (here 1 MiB) budget
        state_dir=d / "state",
        trace_dir=d / "traces",
        agent_socket=d / "agent.sock",
    )
    shutil.rmtree(d, ignore_errors=True)


def test_dynod_says_once_at_start_which_window_it_keeps(
    workdir: DaemonConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = dataclasses.replace(workdir, history_max_bytes=1 << 20)  # dynod's history_max_bytes / --history-max-bytes
    daemon = Daemon(config, samplers=[_Wide()])  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.app"):
        daemon.start()
    try:
        per_sample = SAMPLE_OVERHEAD_BYTES + 8 * 500
        kept = (1 << 20) // per_sample
        (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("history:")]
        assert line.startswith(f"history: keeping the last {kept * 0.1:g} s ({kept} samples), not history_s 3600 s")
        # 36,000 samples x 4,200 B
        assert "500 values per sample at interval_s 0.1 would take ~144 MiB, more than the history's 1 MiB" in line
        assert daemon.status().history_s == pytest.approx(kept * 0.1)  # what GetStatus and `dyno-cli status` show
    finally:
        daemon.stop(grace_s=0)


def test_no_warning_when_history_s_fits(workdir: DaemonConfig, caplog: pytest.LogCaptureFixture) -> None:
    config = dataclasses.replace(workdir, history_s=600)  # 6,000 samples of ~4.2 KB: ~25 MB, within 96 MiB
    daemon = Daemon(config, samplers=[_Wide()])  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.app"):
        daemon.start()
    try:
        assert not [r for r in caplog.records if r.getMessage().startswith("history:")]
        assert daemon.status().history_s == 600
    finally:
        daemon.stop(grace_s=0)


def test_the_budget_is_a_config_key_and_a_flag_within_bounds(tmp_path: Path) -> None:
    assert resolve([]).history_max_bytes == MAX_HISTORY_BYTES == 96 * 2**20
    assert resolve(["--history-max-bytes", str(2**30)]).history_max_bytes == 2**30
    assert resolve(["--config", config_file(tmp_path, "history_max_bytes = 2097152\n")]).history_max_bytes == 2**21
    for bad in (
        ["--history-max-bytes", "1000"],
        ["--config", config_file(tmp_path, "history_max_bytes = 100000000000\n")],
    ):
        with pytest.raises(ConfigError, match="history_max_bytes"):
            resolve(bad)
