"""A whole in-process dynod (gRPC, agent socket, no kineto endpoint) with one constant host sampler, on free ports
in a short temp folder: for tests of the servers' limits, not of sampling."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dyno.daemon.app import Daemon
from dyno.daemon.config import DaemonConfig
from dyno.daemon.samplers.base import Reading, SamplerState

from conftest import short_tmpdir

__all__ = ["OneValueSampler", "daemon_config", "small_daemon"]


class OneValueSampler:
    name = "host"

    def state(self) -> SamplerState:
        return SamplerState(name="host", ok=True, backend="test")

    def sample(self) -> list[Reading]:
        return [Reading("cpu_user_percent", 1.0, ())]

    def close(self) -> None:
        pass


def daemon_config(d: Path, **kw: object) -> DaemonConfig:
    """A dynod's configuration on free ports with its state, traces and agent socket under `d`, no kineto
    endpoint, sampling every 0.1 s; `kw` overrides any field."""
    base: dict[str, object] = dict(
        port=0,
        metrics_port=0,
        kineto_endpoint="off",
        interval_s=0.1,
        history_s=10,
        state_dir=d / "state",
        trace_dir=d / "traces",
        agent_socket=d / "agent.sock",
    )
    return DaemonConfig(**{**base, **kw})  # type: ignore[arg-type]


@contextmanager
def small_daemon(prefix: str, interval_s: float = 0.1) -> Iterator[Daemon]:
    """`interval_s`: how often it samples (a StreamMetrics call waits for the next sample)."""
    d = short_tmpdir(prefix)
    daemon = Daemon(daemon_config(d, interval_s=interval_s), samplers=[OneValueSampler()])  # type: ignore[list-item]
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)
