"""Reading a Python interpreter's command line as Python reads it: its options, then the script, `-c` or `-m`.

Shared by dyno-run (which options keep its bootstrap from running) and the bootstrap itself (is this process
torch's launcher, e.g. `python -m torch.distributed.run` or the `torchrun` console script).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PythonArgs", "parse_python_args"]

_VALUE_FLAGS = "WX"  # short options taking a value (the rest of the word, else the next word)
_VALUE_LONG_OPTIONS = frozenset({"--check-hash-based-pycs"})  # the only long option taking a value


@dataclass(frozen=True)
class PythonArgs:
    """What an interpreter's arguments (sys.orig_argv[1:]) ask for."""

    flags: tuple[str, ...] = ()  # single-letter options without a value, in order, each once ("I", "u")
    module: str | None = None  # -m MODULE
    command: str | None = None  # -c COMMAND
    script: str | None = None  # the script's path ("-" for stdin); None with -m or -c, or an interactive Python


def parse_python_args(args: Sequence[str]) -> PythonArgs:
    """The interpreter options and target in `args` (the words after the interpreter): combined (`-Iu`) or not,
    `-W`/`-X` taking a value, options ending at the script, `-c`, `-m`, `-` or `--`."""
    flags: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            return PythonArgs(tuple(flags), script=args[i] if i < len(args) else None)
        if arg == "-" or not arg.startswith("-"):
            return PythonArgs(tuple(flags), script=arg)
        if arg.startswith("--"):
            i += arg in _VALUE_LONG_OPTIONS
            continue
        for at, flag in enumerate(arg[1:], 2):
            if flag in "cm":  # the rest of this word, else the next word, is the command or module
                value = arg[at:] if at < len(arg) else (args[i] if i < len(args) else "")
                if flag == "m":
                    return PythonArgs(tuple(flags), module=value)
                return PythonArgs(tuple(flags), command=value)
            if flag in _VALUE_FLAGS:
                i += at == len(arg)
                break
            if flag not in flags:
                flags.append(flag)
    return PythonArgs(tuple(flags))
