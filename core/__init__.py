"""dyno: find and fix efficiency problems in fleets of GPU servers running PyTorch.

Subpackages: dyno.daemon (dynod), dyno.client (DynoClient, Cluster, dyno-cli, trainer agent),
dyno.trace_analysis (trace loading, breakdowns, antipattern rules, reports), dyno.v1 (generated API).
"""

__version__ = "0.1.0"
API_VERSION = "dyno.v1"

__all__ = ["__version__", "API_VERSION"]
