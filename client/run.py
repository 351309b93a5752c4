"""`dyno-run [--job-id J] [--socket PATH] -- COMMAND [ARGS...]`: run COMMAND with the dyno agent in every Python
process it starts, without changing the program.

It sets DYNO_AGENT=1 and puts a bootstrap directory holding a `sitecustomize.py` first on PYTHONPATH; every Python
interpreter launched below (the trainer, torchrun and its workers) then starts the agent, which registers with
the local dynod once the process imports torch. dyno-run then *replaces itself* with COMMAND (exec): the command
keeps dyno-run's pid, receives every signal sent to it directly and its exit status is dyno-run's, exactly as if it
had been started on its own. `--print-env` prints the variables instead, for launchers that cannot be wrapped.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dyno.argtypes import job_id
from dyno.client.agent.env import ENV_SOCKET
from dyno.job_ids import ENV_JOB_ID
from dyno.python_argv import parse_python_args
from dyno.request_limits import JOB_ID_RULE

__all__ = [
    "BOOTSTRAP_DIR",
    "ENV_AGENT",
    "agent_environment",
    "bootstrap_skipping_flags",
    "build_parser",
    "main",
]

ENV_AGENT = "DYNO_AGENT"
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"

# Interpreter options that keep the bootstrap's sitecustomize from running: -E and -I ignore PYTHONPATH (where the
# bootstrap is), -S skips the `site` module (which imports sitecustomize). os.environ is untouched by them, so the
# processes such an interpreter starts without the flag (torchrun's workers) still start the agent.
_SKIPPING_FLAGS = {"E": "ignores PYTHONPATH", "I": "ignores PYTHONPATH", "S": "does not import site"}
_PYTHON_NAME = re.compile(r"\A(?:python|pypy)[0-9.]*\Z")
_ENV_ASSIGNMENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*=")
_MAX_SHEBANG = 512


def _interpreter_args(command: Sequence[str], depth: int = 0) -> list[str] | None:
    """The options-and-arguments given to Python by `command`: `python ...`, `/usr/bin/env [VAR=x] python ...`, or a
    script whose `#!` line runs Python (its options there, then the command's). None when it is not Python."""
    if not command or depth > 2:
        return None
    name = os.path.basename(command[0])
    if name == "env":
        rest = [a for a in command[1:] if not _ENV_ASSIGNMENT.match(a)]  # `env -S "python -I"` is not followed
        return _interpreter_args(rest, depth + 1) if rest and not rest[0].startswith("-") else None
    if _PYTHON_NAME.match(name):
        return list(command[1:])
    shebang = _shebang(command[0])
    if shebang is None:
        return None
    inner = _interpreter_args(shebang, depth + 1)
    return None if inner is None else [*inner, *command[1:]]


def _shebang(program: str) -> list[str] | None:
    """The words of `program`'s `#!` line (the program found on PATH as exec does), None if it has none."""
    path = program if os.sep in program else shutil.which(program)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            line = f.readline(_MAX_SHEBANG)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    # `#!/usr/bin/env -S python3 -I`: env splits the rest into words itself
    if len(words) > 2 and os.path.basename(words[0]) == "env" and words[1] == "-S":
        words = [words[0], *words[2:]]
    return words or None


def bootstrap_skipping_flags(command: Sequence[str]) -> list[str]:
    """The interpreter options in `command` (e.g. ["-I"]) that keep dyno-run's bootstrap, so the agent, from
    starting in the process it runs; [] when none (or the command is not Python). Options are read as Python
    reads them (dyno.python_argv), up to the script, `-c` or `-m`."""
    args = _interpreter_args(command)
    if args is None:
        return []
    return [f"-{flag}" for flag in parse_python_args(args).flags if flag in _SKIPPING_FLAGS]


def _warn_skipped_bootstrap(command: Sequence[str]) -> None:
    flags = bootstrap_skipping_flags(command)
    if not flags:
        return
    why = "; ".join(f"{f} {_SKIPPING_FLAGS[f[1]]}" for f in flags)
    print(
        f"dyno-run: warning: Python runs {' '.join(flags)} here, which keeps dyno-run's bootstrap from running ({why}):"
        f" the dyno agent will not start in {command[0]!r}, and dyno-cli trace will not find it. Drop "
        f"{'/'.join(flags)}, or call dyno.client.agent.start() in the program. Python processes it starts without "
        "the option (e.g. torchrun's workers) still start the agent.",
        file=sys.stderr,
    )


def agent_environment(
    base: Mapping[str, str], *, job_id: str | None = None, socket_path: str | None = None
) -> dict[str, str]:
    """The variables to add to `base` so Python processes start the agent (only the changed ones)."""
    paths = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(BOOTSTRAP_DIR)]
    env = {ENV_AGENT: "1", "PYTHONPATH": os.pathsep.join([str(BOOTSTRAP_DIR), *paths])}
    if job_id:
        env[ENV_JOB_ID] = job_id
    if socket_path:
        env[ENV_SOCKET] = str(Path(socket_path).absolute())
    return env


def _job_id(text: str) -> str:
    """A job id dynod accepts (else every process would be refused at registration, untraceable); blank (e.g. an
    unset variable in a launcher script) leaves the default as before."""
    return job_id(text) if text.strip() else ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dyno-run",
        usage="dyno-run [--job-id J] [--socket PATH] [--print-env] -- COMMAND [ARGS...]",
        description="Run COMMAND with the dyno trainer agent started in every Python process it launches, so "
        "`dyno-cli trace` can profile it on demand. COMMAND replaces dyno-run (same pid, signals, exit status).",
        epilog=f"Environment: {ENV_AGENT}=1 enables the agent (0 disables it in a process); {ENV_JOB_ID} sets the "
        f"job id (else SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID); {ENV_SOCKET} "
        "the daemon's agent socket (else a dynod of this user's default path or the system dynod's "
        "/run/dyno/agent.sock, whichever listens); RANK/LOCAL_RANK/WORLD_SIZE the rank info.",
    )
    p.add_argument(
        "--job-id",
        type=_job_id,
        help=f"job id to register with (sets {ENV_JOB_ID}; {JOB_ID_RULE}, as dynod requires; blank: the default)",
    )
    p.add_argument("--socket", metavar="PATH", help=f"the daemon's agent socket (sets {ENV_SOCKET})")
    p.add_argument(
        "--print-env", action="store_true", help="print `export` lines for the variables instead of running a command"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    env = agent_environment(os.environ, job_id=args.job_id, socket_path=args.socket)
    if args.print_env:
        for key, value in env.items():
            print(f"export {key}={shlex.quote(value)}")
        return 0
    if not command:
        build_parser().print_usage(sys.stderr)
        print("dyno-run: error: no command given (put it after --)", file=sys.stderr)
        return 2
    _warn_skipped_bootstrap(command)
    try:
        os.execvpe(command[0], command, {**os.environ, **env})
    except OSError as e:
        print(f"dyno-run: cannot run {command[0]!r}: {e.strerror or e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
