"""torch's launcher under dyno-run: `torchrun` / `python -m torch.distributed.run` imports torch but only starts the
workers, so the bootstrap does not start the agent in it (it registered as a trainer, and an --iterations trace
waited for its optimizer steps until it timed out). Its workers still start it. The command-line reader shared
with dyno-run is tested here too. Real Python processes for the bootstrap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.client.agent.env import torch_launcher
from dyno.python_argv import PythonArgs, parse_python_args

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "args, parsed",
    [
        (["train.py", "-m", "x"], PythonArgs(script="train.py")),
        (["-u", "-m", "torch.distributed.run", "t.py"], PythonArgs(("u",), module="torch.distributed.run")),
        (["-mtorch.distributed.launch"], PythonArgs(module="torch.distributed.launch")),
        (["-Ic", "print(1)"], PythonArgs(("I",), command="print(1)")),
        (["-X", "dev", "-W", "-m", "t.py"], PythonArgs(script="t.py")),  # -m is -W's value
        (["--check-hash-based-pycs", "always", "--", "-x.py"], PythonArgs(script="-x.py")),
        (["-"], PythonArgs(script="-")),
        (["-q"], PythonArgs(("q",))),
        (["-m"], PythonArgs(module="")),
    ],
)
def test_parse_python_args(args: list[str], parsed: PythonArgs) -> None:
    assert parse_python_args(args) == parsed


@pytest.mark.parametrize(
    "argv, launcher",
    [
        (["/venv/bin/python3", "/venv/bin/torchrun", "--nproc-per-node", "2", "train.py"], "torchrun"),
        (["python", "-u", "/usr/local/bin/torchrun", "train.py"], "torchrun"),
        (["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "train.py"], "torch.distributed.run"),
        (["python3", "-Bm", "torch.distributed.launch", "train.py"], "torch.distributed.launch"),
        # torchrun's workers: `python -u train.py ...` (the script's own arguments do not count)
        (["/venv/bin/python3", "-u", "train.py", "--launcher", "torchrun"], None),
        (["python", "train.py", "-m", "torch.distributed.run"], None),
        (["python", "-m", "torch.distributed.elastic.multiprocessing"], None),
        (["python", "-c", "from torch.distributed.run import main; main()"], None),  # not recognized (documented)
        (["python"], None),
    ],
)
def test_torch_launcher_from_the_command_line(argv: list[str], launcher: str | None) -> None:
    assert torch_launcher(argv) == launcher


# The agent starts once a process imports torch: a stand-in `torch` module (fake_torch() on PYTHONPATH) is enough.
PROBE = "import sys, torch; print('agent' if 'dyno.client.agent' in sys.modules else 'no agent')\n"


def fake_torch(tmp_path: Path) -> str:
    (tmp_path / "fake_torch").mkdir(exist_ok=True)
    (tmp_path / "fake_torch" / "torch.py").write_text("")
    return str(tmp_path / "fake_torch")


def _under_dyno_run(tmp_path: Path, command: list[str]) -> str:
    env = {
        **os.environ,
        "DYNO_AGENT_SOCKET": "/nonexistent/dyno-test/agent.sock",  # no daemon: it retries quietly
        "PYTHONPATH": os.pathsep.join(p for p in (fake_torch(tmp_path), os.environ.get("PYTHONPATH", "")) if p),
    }
    res = subprocess.run(
        [sys.executable, "-m", "dyno.client.run", "--", *command], capture_output=True, text=True, timeout=60, env=env
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_the_bootstrap_skips_a_torchrun_console_script_but_not_a_trainer(tmp_path: Path) -> None:
    # A console script called torchrun (the kernel runs it as `python /path/torchrun ...`, as pip's torchrun is).
    launcher = tmp_path / "torchrun"
    launcher.write_text(f"#!{sys.executable}\n{PROBE}")
    launcher.chmod(0o755)
    assert _under_dyno_run(tmp_path, [str(launcher), "--nproc-per-node", "2", "train.py"]) == "no agent"
    trainer = tmp_path / "train.py"
    trainer.write_text(PROBE)
    assert _under_dyno_run(tmp_path, [sys.executable, "-u", str(trainer), "torchrun"]) == "agent"
