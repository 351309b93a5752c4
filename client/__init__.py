"""Client side: DynoClient (one host), Cluster (many), dyno-cli, the trainer agent."""

from dyno.client.client import DEFAULT_PORT, DynoClient
from dyno.client.errors import DynoError

__all__ = ["DynoClient", "DynoError", "DEFAULT_PORT"]
