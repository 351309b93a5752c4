"""Client side: DynoClient (one host), Cluster (many), dyno-cli, the trainer agent."""

from dyno.client.client import DEFAULT_PORT, DynoClient
from dyno.client.cluster import Cluster, HostResult
from dyno.client.errors import DynoError
from dyno.client.hosts import Host

__all__ = ["Cluster", "DynoClient", "DynoError", "DEFAULT_PORT", "Host", "HostResult"]
