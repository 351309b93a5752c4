"""Ctrl-C in dyno-cli's first fraction of a second, while grpc and the command modules are still being imported,
printed a KeyboardInterrupt traceback (main()'s handler was not running yet). Now it is one line and exit 130."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# A real SIGINT, delivered while build_parser() imports the `status` command module (deterministic: no sleeps).
_INTERRUPTED_WHILE_IMPORTING = """
import importlib, os, signal, sys
from dyno.client import cli

real_import = importlib.import_module

def import_module(name, package=None):
    if name.endswith(".commands.status"):
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, package)

importlib.import_module = import_module
sys.exit(cli.main(["status", "--host", "127.0.0.1:1"]))
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_ctrl_c_while_the_commands_are_imported_is_quiet_exit_130() -> None:
    r = _run(_INTERRUPTED_WHILE_IMPORTING)
    assert r.returncode == 130, r.stderr
    assert r.stderr == "dyno-cli: interrupted\n"


def test_the_entry_module_imports_nothing_heavy() -> None:
    """What runs before main() (the console script's `from dyno.client.cli import main`) stays unprotected: it must
    not load grpc, which takes most of the start-up time."""
    heavy = "('grpc', 'google.protobuf')"
    r = _run(f"import sys\nfrom dyno.client.cli import main\nprint(sorted(m for m in {heavy} if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
