"""--since DURATION of the commands over the fleet's jobs (jobs, opportunities): '7d', '12h', '90m', '30s', '2w'."""

from __future__ import annotations

import argparse
import re

__all__ = ["MAX_SINCE_S", "parse_since"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SINCE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
MAX_SINCE_S = 10 * 365 * 86400


def parse_since(text: str) -> float:
    """'7d', '12h', '90m', '30s', '2w' -> seconds."""
    m = _SINCE.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 7d, 12h, 30m or 90s")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not 0 < seconds <= MAX_SINCE_S:
        raise argparse.ArgumentTypeError(f"{text!r}: give more than 0 and at most 10 years")
    return seconds
