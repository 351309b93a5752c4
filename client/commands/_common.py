"""Output helpers shared by the commands (host options live in _hosts.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dyno.client.format import table

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from dyno.client.cluster import HostResult

__all__ = [
    "REGISTER_HINT",
    "JsonText",
    "host_entry",
    "host_table",
    "print_json",
    "print_out",
    "proto_to_dict",
    "stdout_gone",
    "terminal_width",
]

T = TypeVar("T")

# What to try when a daemon has no process registered at all (`ps`, `trace`): the usual reason is a trainer started
# without the agent or libkineto's daemon mode, or looking for another dynod's socket.
REGISTER_HINT = (
    "hint: a PyTorch process registers once it has imported torch, when started under `dyno-run` (or calling "
    "dyno.client.agent.start()) or with KINETO_USE_DAEMON=1; a dynod with a non-default --agent-socket must be "
    "named with DYNO_AGENT_SOCKET (docs/AGENT.md)"
)


def proto_to_dict(msg: Message) -> dict[str, Any]:
    """dyno.client.proto_json.proto_to_dict, imported on first call: a command's parser loads no protobuf."""
    from dyno.client.proto_json import proto_to_dict as convert

    return convert(msg)


class JsonText(str):
    """A document already rendered as JSON (the analysis report, by orjson), placed as a value of print_json's
    top-level object as it is, indented to its depth: decoding a 1,024-rank report (~30 MB) to re-encode it with
    the stdlib's pure-Python indenting encoder took longer than the merge that made it."""


def print_json(obj: Any) -> None:
    print_out(json_document(obj))


def json_document(obj: Any) -> str:
    """`obj` as indented JSON; JsonText values of a top-level dict go in as they are."""
    if not isinstance(obj, dict) or not any(isinstance(v, JsonText) for v in obj.values()):
        return json.dumps(obj, indent=2, sort_keys=False)
    # as json.dumps(obj, indent=2) lays out a dict: a member a line, each value indented one level deeper
    members = (
        f"  {json.dumps(str(key))}: "
        + (value.rstrip("\n") if isinstance(value, JsonText) else json.dumps(value, indent=2)).replace("\n", "\n  ")
        for key, value in obj.items()
    )
    return "{\n" + ",\n".join(members) + "\n}"


def print_out(text: str = "") -> None:
    """print() to stdout, flushed, for a reader that may leave (`dyno-cli trace ... | grep -q straggler`, `| head`,
    quitting `less`): then stdout is given up and the command goes on with its files, --html, stderr lines and exit
    code (a BrokenPipeError must not end the command at its first table with exit 0)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        stdout_gone()


def terminal_width() -> int | None:
    """The terminal's width in columns when stdout is one; None into a pipe or file (every character kept)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def stdout_gone() -> None:
    """Point stdout at /dev/null once its reader has left: what is still to print goes nowhere, and Python's flush
    at exit does not report the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def host_entry(r: HostResult[Any], fields: dict[str, Any]) -> dict[str, Any]:
    """One host's object in a multi-host --json answer: every host is listed, failed ones too, so a tool can
    tell which failed and why: {"host", "ok", **fields, "error": None or "ErrorType: message"}."""
    return {"host": str(r.host), "ok": r.ok, **fields, "error": None if r.ok else f"{r.error_type}: {r.error}"}


def host_table(headers: Sequence[str], results: Sequence[HostResult[T]], row: Callable[[T], Sequence[object]]) -> str:
    """One row per host, in host order, failed hosts included: HOST (the first header), then `row(answer)`; a
    failed host's row has its error type (e.g. Unavailable) in the first column after HOST and '-' in the others
    (the error itself goes to stderr, print_failures)."""
    rows: list[list[object]] = []
    for r in results:
        if r.ok:
            rows.append([str(r.host), *row(r.answer)])
        else:
            rows.append([str(r.host), r.error_type or "failed", *["-"] * (len(headers) - 2)])
    return table(headers, rows, text=headers[:1])
