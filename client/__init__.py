"""Client side: DynoClient (one host), Cluster (many), dyno-cli, the trainer agent.

Names are imported lazily: dyno-run's bootstrap imports `dyno.client.agent` in every Python process it starts,
and must not pay for grpc and the cluster code in processes that never trace (DataLoader helpers, tools).
"""

from __future__ import annotations

from dyno.lazy_names import lazy_getattr

__all__ = ["Cluster", "DynoClient", "DynoError", "DEFAULT_PORT", "Host", "HostResult"]

# the submodule that defines each public name
_HOME = {
    "Cluster": "cluster",
    "HostResult": "cluster",
    "DynoClient": "client",
    "DEFAULT_PORT": "client",
    "DynoError": "errors",
    "Host": "hosts",
}

__getattr__ = lazy_getattr(__name__, _HOME)
