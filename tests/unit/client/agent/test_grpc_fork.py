"""The agent imports grpc with GRPC_ENABLE_FORK_SUPPORT=false (unless the program chose a value): with its Watch
call always in flight, grpc's fork handlers otherwise log "Other threads are currently calling into gRPC, skipping
fork() handlers" at every fork() of the trainer (every DataLoader epoch with fork workers). The agent's generated
stub module imports grpc too, so the order of the imports decides which environment grpc sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import short_tmpdir

pytestmark = pytest.mark.unit

# A fresh interpreter (grpc not imported yet) records the variable's value when grpc is first imported, then runs
# one connection attempt of the agent against a socket nobody listens on.
_PROGRAM = """
import importlib.abc, os, sys

seen = []

class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "grpc":
            seen.append(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
        return None

sys.meta_path.insert(0, Recorder())
from dyno.client.agent import Agent

try:
    Agent(socket_path=sys.argv[1])._conn._session()
except Exception:
    pass  # no daemon there: only the import order matters
print(seen, os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
"""


@pytest.mark.parametrize(("preset", "expected"), [(None, "['false'] None"), ("true", "['true'] true")])
def test_agent_imports_grpc_without_fork_handlers(preset: str | None, expected: str) -> None:
    d = short_tmpdir("dyno-fork-")
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    if preset is not None:
        env["GRPC_ENABLE_FORK_SUPPORT"] = preset  # the program's own choice is kept
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROGRAM, str(Path(d) / "none.sock")],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    finally:
        d.rmdir()
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected
