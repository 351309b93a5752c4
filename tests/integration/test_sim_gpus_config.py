"""`sim_gpus = 4` in dynod's config file with the GPU backend left at auto gets the warning the `--sim-gpus 4` flag
gets: simulated GPUs need `--gpu-backend sim`. Real dynod processes on free ports."""

from __future__ import annotations

import shutil

import pytest

from dyno.daemon.process import DynodProcess

from conftest import free_port, short_tmpdir

pytestmark = pytest.mark.integration


def _log_of_dynod(config_text: str, *flags: str) -> str:
    d = short_tmpdir("dyno-e3sim-")
    (d / "dynod.toml").write_text(config_text)
    proc = DynodProcess(
        ["--config", str(d / "dynod.toml"), "--listen", "127.0.0.1", "--port", str(free_port())]
        + ["--metrics-port", "0", "--state-dir", str(d / "state"), "--trace-dir", str(d / "traces")]
        + ["--agent-socket", str(d / "agent.sock"), "--kineto-endpoint", "off", *flags]
    )
    try:
        proc.start()
        assert proc.is_ready, proc.log
    finally:
        proc.stop()
        shutil.rmtree(d, ignore_errors=True)
    return proc.log


def test_sim_gpus_in_the_file_without_sim_backend_is_warned() -> None:
    log = _log_of_dynod('sim_gpus = 4\ngpu_backend = "auto"\n')
    assert "sim_gpus = 4 in" in log and "is ignored: gpu_backend auto never simulates" in log, log


def test_sim_gpus_with_the_sim_backend_is_not_warned() -> None:
    log = _log_of_dynod('sim_gpus = 4\ngpu_backend = "sim"\n')
    assert "is ignored" not in log, log
