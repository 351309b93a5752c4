"""Exit codes of dyno's command lines (dynod, dyno-cli and its commands), in one place.

The code returns these constants, and every --help prints its command's codes from a table of them (`describe`),
so the help cannot drift from what the code returns: tests/unit/core/test_exit_codes.py checks that each code a
command can return is in its help. dyno-run's codes are the wrapped program's own (see its --help).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "FAILURE",
    "GENERAL",
    "INTERRUPTED",
    "OK",
    "PARTIAL",
    "USAGE",
    "describe",
]

OK = 0
FAILURE = 1
USAGE = 2  # argparse's own code for a bad command line; dyno uses it for every mistake found before any work
PARTIAL = 3  # fan-out commands: some hosts (or some trace files) failed, others did not
INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a program ended by Ctrl-C

# What each code means whatever the command (dyno-cli's own --help); each command's table says it for the command.
GENERAL: Mapping[int, str] = {
    OK: "ok",
    FAILURE: "failure (nothing done, e.g. no host answered, nothing traced or fetched, no trace loaded)",
    USAGE: "usage error (bad options or values, found before any host is called)",
    PARTIAL: "partial (status, version, metrics, ps: some hosts failed; trace, fetch: some hosts failed or some "
    "trace files did not arrive, e.g. a trace timed out or was incomplete; each named on stderr)",
    INTERRUPTED: "interrupted (Ctrl-C or SIGTERM)",
}


def describe(codes: Mapping[int, str]) -> str:
    """The "Exit codes: 0 ...; 1 ...; ..." sentence of a --help, in code order."""
    return "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in sorted(codes.items())) + "."
