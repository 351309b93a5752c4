"""Usage errors of dyno-cli's commands: one line on stderr, exit code 2. Apart from the host options (_hosts.py,
which load grpc) so that dyno-cli's main can catch them without loading grpc for `analyze`."""

from __future__ import annotations

import sys
from typing import NoReturn

from dyno import exit_codes

__all__ = ["UsageError", "usage_error"]


class UsageError(SystemExit):
    """Exit code 2 with its one-line `message` (already on stderr): dyno-cli's main prints it as JSON too when the
    command was asked for --json. A SystemExit, so that whatever does not know it still exits 2."""

    def __init__(self, message: str) -> None:
        super().__init__(exit_codes.USAGE)
        self.message = message


def usage_error(message: str) -> NoReturn:
    """One line on stderr, exit code 2 (as argparse does for usage errors)."""
    print(f"dyno-cli: error: {message}", file=sys.stderr)
    raise UsageError(message)
