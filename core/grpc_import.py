"""grpc imported without its fork handlers (GRPC_ENABLE_FORK_SUPPORT=false, unless the program chose a value).

With grpc's fork support on, a fork() while other threads are inside grpc logs "Other threads are currently calling
into gRPC, skipping fork() handlers", and the child may die (SIGSEGV) before it reaches exec: seen for about 1 in 4
runs of tests/integration/test_security_local_users.py, whose children (`sleep` as nobody) are forked beside a
serving daemon's threads, so that Popen returned the pid of a dead child. Neither a trainer's agent (its Watch call
always in flight; a DataLoader forks every epoch) nor dynod (its analysis workers are forked while it serves) uses
grpc in a forked child: their children exec, or leave the channel alone.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["import_grpc"]

_VAR = "GRPC_ENABLE_FORK_SUPPORT"


def import_grpc() -> Any:
    """grpc, imported with fork support off unless the variable is set (the program's choice is kept); the process's
    environment is left as it was, so that its children see what they would have."""
    if "grpc" in sys.modules:
        return sys.modules["grpc"]
    added = _VAR not in os.environ
    if added:
        os.environ[_VAR] = "false"
    try:
        import grpc
    finally:
        if added:
            os.environ.pop(_VAR, None)
    return grpc
