"""Reading a Python interpreter's command line as Python reads it: its options, then the script, `-c` or `-m`.

Shared by dyno-run (which options keep its bootstrap from running), the bootstrap itself (is this process torch's
launcher, e.g. `python -m torch.distributed.run` or the `torchrun` console script) and dynod (is a libkineto sender
torch's launcher, from its /proc/<pid>/cmdline). Standard library only: the bootstrap imports it in every Python
process started under dyno-run, and the daemon never imports dyno.client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PythonArgs", "parse_python_args", "torch_launcher"]

_VALUE_FLAGS = "WX"  # short options taking a value (the rest of the word, else the next word)
_VALUE_LONG_OPTIONS = frozenset({"--check-hash-based-pycs"})  # the only long option taking a value
# torch's launchers: they start the workers and wait, never stepping an optimizer themselves. torch.distributed.launch
# is the deprecated front of torch.distributed.run; `torchrun` is the console script that calls run's main().
_LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
_LAUNCHER_SCRIPTS = frozenset({"torchrun", "torchrun-script.py", "torchrun.exe"})


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


def torch_launcher(argv: Sequence[str]) -> str | None:
    """What torch launcher an interpreter started with `argv` (sys.orig_argv, or a /proc/<pid>/cmdline split at its
    NULs: the interpreter, then its arguments) runs: "torch.distributed.run" for `python -m torch.distributed.run ...`
    (or torch.distributed.launch), "torchrun" for the console script (`torchrun ...`, which the kernel runs as
    `python /path/to/torchrun ...`); None for any other program. Such a launcher imports torch but only starts workers
    and waits for them: it is no trainer (an iteration trace would wait for its optimizer steps in vain)."""
    parsed = parse_python_args(argv[1:])
    if parsed.module in _LAUNCHER_MODULES:
        return parsed.module
    if parsed.script is not None and os.path.basename(parsed.script) in _LAUNCHER_SCRIPTS:
        return "torchrun"
    return None
