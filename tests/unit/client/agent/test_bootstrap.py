"""dyno-run's bootstrap: a Python process that never imports torch loads no agent and runs no agent thread; the
agent starts right after the process imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PROBE = "import sys, threading\n{imports}\nprint('dyno.client.agent' in sys.modules, threading.active_count())\n"


def _run(tmp_path: Path, imports: str) -> str:
    (tmp_path / "torch.py").write_text("")  # a stand-in: the bootstrap only needs `import torch` to happen
    env = {
        **os.environ,
        "DYNO_AGENT_SOCKET": str(tmp_path / "no-daemon.sock"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p),
    }
    res = subprocess.run(
        [sys.executable, "-m", "dyno.client.run", "--", sys.executable, "-c", PROBE.format(imports=imports)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_a_python_process_without_torch_gets_no_agent(tmp_path: Path) -> None:
    assert _run(tmp_path, "import json") == "False 1"  # was "True 3": the agent and its two threads


def test_the_agent_starts_when_torch_is_imported(tmp_path: Path) -> None:
    loaded, threads = _run(tmp_path, "import torch").split()
    assert loaded == "True" and int(threads) >= 3
