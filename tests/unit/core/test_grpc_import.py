"""grpc imported without its fork handlers (dyno.grpc_import): GRPC_ENABLE_FORK_SUPPORT=false when grpc is first
imported, unless the program chose a value, and the environment left as it was; dynod's entry imports it so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# A fresh interpreter (grpc not imported yet) that records the variable's value when grpc is first imported; with
# STOP set, it exits right there (dynod's main would go on to start a daemon).
_RECORDER = """
import importlib.abc, os, sys

class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "grpc":
            print("at import:", os.environ.get("GRPC_ENABLE_FORK_SUPPORT"), flush=True)
            if os.environ.get("STOP"):
                os._exit(0)
        return None

sys.meta_path.insert(0, Recorder())
"""


def _run(code: str, preset: str | None = None, stop: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    if preset is not None:
        env["GRPC_ENABLE_FORK_SUPPORT"] = preset
    if stop:
        env["STOP"] = "1"
    out = subprocess.run([sys.executable, "-c", _RECORDER + code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize(("preset", "expected"), [(None, "false\nafter: None"), ("true", "true\nafter: true")])
def test_grpc_is_imported_without_fork_handlers_and_the_environment_is_left_as_it_was(
    preset: str | None, expected: str
) -> None:
    code = (
        "from dyno.grpc_import import import_grpc; import_grpc()\n"
        "print('after:', os.environ.get('GRPC_ENABLE_FORK_SUPPORT'))"
    )
    assert _run(code, preset) == "at import: " + expected


def test_dynod_imports_grpc_without_fork_handlers() -> None:
    code = "from dyno.daemon.main import main; main(['--gpu-backend', 'none', '--port', '0'])"
    assert _run(code, stop=True) == "at import: false"
