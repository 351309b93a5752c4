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
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dyno.argtypes import job_id
from dyno.client.agent_env import ENV_SOCKET
from dyno.job_ids import ENV_JOB_ID
from dyno.request_limits import JOB_ID_RULE

__all__ = ["BOOTSTRAP_DIR", "ENV_AGENT", "agent_environment", "build_parser", "main"]

ENV_AGENT = "DYNO_AGENT"
BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"


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
        "the daemon's agent socket (else the daemon's default path); RANK/LOCAL_RANK/WORLD_SIZE the rank info.",
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
    try:
        os.execvpe(command[0], command, {**os.environ, **env})
    except OSError as e:
        print(f"dyno-run: cannot run {command[0]!r}: {e.strerror or e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(main())
