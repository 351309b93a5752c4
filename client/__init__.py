"""Client side: DynoClient (one host), Cluster (many), dyno-cli, the trainer agent.

Names are imported lazily: dyno-run's bootstrap imports `dyno.client.agent` in every Python process it starts,
and must not pay for grpc and the cluster code in processes that never trace (DataLoader helpers, tools).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Cluster", "DynoClient", "DynoError", "DEFAULT_PORT", "Host", "HostResult"]

_WHERE = {
    "Cluster": "dyno.client.cluster",
    "HostResult": "dyno.client.cluster",
    "DynoClient": "dyno.client.client",
    "DEFAULT_PORT": "dyno.client.client",
    "DynoError": "dyno.client.errors",
    "Host": "dyno.client.hosts",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'dyno.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
