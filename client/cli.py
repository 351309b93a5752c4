"""`dyno-cli`: talk to one dynod (or many: see --hosts in the commands that support it).

Each subcommand lives in dyno.client.commands.<name> and exposes `register(subparsers)`; its parser sets
`func(args) -> int`. dyno.client.commands._catalog names them with their one-line helps: only the command run is
imported, and none for the top-level --help. Errors from daemons become one line on stderr and exit code 1; usage
errors exit 2 (the codes are dyno.exit_codes', and each command's --help lists its own).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import dyno
from dyno import exit_codes
from dyno.client import commands
from dyno.client.commands._catalog import COMMANDS
from dyno.usage_json import json_requested, parse_args_reporting

__all__ = ["ERROR_SCHEMA", "main", "build_parser", "top_level_parser"]

ERROR_SCHEMA = "dyno.cli.error"  # what --json prints on stdout when a command fails before its own answer


class _CommandParser(argparse.ArgumentParser):
    """dyno-cli's top-level parser: an option the command does not know is that command's usage error (its usage
    and options), not the top-level usage, which argparse printed for `dyno-cli status --foo`."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            subparsers = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
            owner = subparsers.choices.get(command, self) if subparsers is not None and command else self
            owner.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def build_parser(names: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the commands ``names`` (their modules imported), of every command when None."""
    parser, sub = _top_level()
    for name in list(COMMANDS) if names is None else names:
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def top_level_parser() -> argparse.ArgumentParser:
    """The parser when no command is run (--help, --version, no command, an unknown one): each command a bare
    entry with its one-line help, so that no command module (grpc, protobuf, numpy) is imported. Its --help and
    its errors are those of build_parser()'s, byte for byte."""
    parser, sub = _top_level()
    for name, summary in COMMANDS.items():
        sub.add_parser(name, help=summary)
    return parser


def _top_level() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = _CommandParser(
        prog="dyno-cli",
        description="dyno command-line client: daemon status and metrics, registered PyTorch processes, "
        "on-demand tracing, and trace analysis.",
        epilog="Run `dyno-cli COMMAND --help` for a command's options and its exit codes; options may also come "
        "before COMMAND (`dyno-cli --host gpu1 status`, as with dynolog's dyno). "
        + exit_codes.describe(exit_codes.GENERAL),
    )
    parser.add_argument("--version", action="version", version=f"dyno-cli {dyno.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    return parser, sub


def command_first(argv: list[str], commands: list[str]) -> list[str]:
    """Options given before the command (`dyno-cli --host h status`, dynolog's habit) move after it: every option
    belongs to a command. Only the first word that names a command moves; --help/--version stay global."""
    if not argv or not argv[0].startswith("-") or argv[0] in ("-h", "--help", "--version"):
        return argv
    i = next((i for i, word in enumerate(argv) if word in commands), None)
    return argv if i is None else [argv[i], *argv[:i], *argv[i + 1 :]]


def main(argv: list[str] | None = None) -> int:
    # grpc's own log lines (e.g. one per failed TLS handshake attempt, at INFO) repeat what the one-line error
    # already says; set before grpc is first imported. GRPC_VERBOSITY=debug still shows them.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    installed = _sigterm_as_ctrl_c()
    handler = _log_to_stderr()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C: say so (exit 130 alone looks like a crash in a script's log)
        print("dyno-cli: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    finally:
        if installed:  # main() called in-process (tests, tools) leaves the caller's SIGTERM as it was
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if handler is not None:
            logging.getLogger("dyno").removeHandler(handler)
        if argv is None:
            _spare_the_exit_collections()


def _spare_the_exit_collections() -> None:
    """main() on the process's own command line (argv None: the console script, `python -m dyno.client`) is the
    last thing the process does: the objects it holds leave the cyclic collector's reach (gc.freeze), which at
    exit walked every one of them in each of the interpreter's three final collections (~4% of the instructions
    of `dyno-cli analyze --json` on a small trace). A caller that passes argv keeps its collector as it was."""
    import gc

    gc.freeze()


class _CliFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"dyno-cli: {record.levelname.lower()}: {record.getMessage()}"


def _log_to_stderr() -> logging.Handler | None:
    """dyno's warnings (a short auth token, a token file others can read) as `dyno-cli: warning: ...` lines like
    the CLI's own errors; without a handler Python printed the bare message. Only where nobody configured logging
    (a program embedding main() keeps its own handlers)."""
    if logging.getLogger().handlers or logging.getLogger("dyno").handlers:
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_CliFormatter())
    logging.getLogger("dyno").addHandler(handler)
    return handler


def _sigterm_as_ctrl_c() -> bool:
    """SIGTERM (`timeout 60 dyno-cli trace ...`, a batch system stopping the job) ends the command as Ctrl-C does:
    the traces it started are cancelled and manifest.json is written with status interrupted (exit 130). It killed
    the process on the spot instead, leaving a manifest "running" forever and no word. Re-raised as SIGINT, so the
    handler in force (Python's, or trace's InterruptGuard that holds it back during a manifest write) decides
    (sigterm_as_ctrl_c: also where SIGINT is ignored).
    Only from the main thread, and only when SIGTERM has its default action (an embedding program's is kept)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return False
    from dyno.client.commands._interrupts import sigterm_as_ctrl_c  # light: signal, threading

    signal.signal(signal.SIGTERM, sigterm_as_ctrl_c)
    return True


def _main(argv: list[str] | None) -> int:
    # Imported here, not at the top: a Ctrl-C right after start lands in these imports (grpc, the commands), and
    # main()'s handler must already be running then to keep it quiet. What this module imports itself is light.
    # None of these loads grpc: the command's own module does, when it calls daemons (`analyze` does not).
    from dyno.client.commands._usage import UsageError
    from dyno.client.errors import DynoError

    names = list(COMMANDS)
    argv = command_first(sys.argv[1:] if argv is None else argv, names)
    # Only the command run is imported (each module loads what its command needs: grpc, the analysis stack); none
    # for the top-level --help, a missing or unknown command, or --version.
    parser = build_parser(argv[:1]) if argv[:1] and argv[0] in names else top_level_parser()
    # --json: a failure is a JSON error object on stdout too (tools read it from there; analyze has its own schema)
    json_out = argv[:1] != ["analyze"] and json_requested(argv)
    if argv[:1] == ["analyze"]:
        from dyno.trace_analysis.cli import parse_args  # analyze's own --json error schema

        args = parse_args(parser, argv)
    elif json_out:
        args = parse_args_reporting(parser, argv, lambda message: _print_error_json(exit_codes.USAGE, message))
    else:
        args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as e:  # already said on stderr
        if json_out:
            _print_error_json(exit_codes.USAGE, e.message)
        raise
    except DynoError as e:
        return _fail(f"{e}", json_out)
    except BrokenPipeError:  # `dyno-cli metrics | head`; before OSError, its base class
        from dyno.client.commands._common import stdout_gone

        # Python flushes stdout again at exit, which would report the closed pipe once more.
        stdout_gone()
        return exit_codes.OK
    except OSError as e:  # a full disk or a permission on the user's side: say which file, no traceback
        where = f": {e.filename}" if e.filename else ""
        return _fail(f"{e.strerror or e}{where}", json_out)


def _fail(message: str, json_out: bool) -> int:
    print(f"dyno-cli: error: {message}", file=sys.stderr)
    if json_out:
        _print_error_json(exit_codes.FAILURE, message)
    return exit_codes.FAILURE


def _print_error_json(code: int, message: str) -> None:
    """The object `--json` prints on stdout when a command fails before its own answer (ERROR_SCHEMA): one line,
    so that it also ends a `metrics --watch --json` stream of one object per line."""
    import json  # here, not with the module: only a failure writes it (~1 ms of `dyno-cli --help`'s start)

    doc = {"schema": ERROR_SCHEMA, "version": 1, "ok": False, "exit_code": code, "error": message}
    print(json.dumps(doc), flush=True)


if __name__ == "__main__":
    sys.exit(main())
