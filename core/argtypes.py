"""argparse `type=` validators shared by dynod and dyno-cli: one clear message per bad value, never a traceback."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

from dyno.request_limits import JOB_ID_RULE, job_id_ok

__all__ = ["INT32_MAX", "INT64_MAX", "job_id", "nonempty_path", "number"]

INT32_MAX = 2**31 - 1  # bounds of proto int32 / int64 fields: larger values fail to serialize
INT64_MAX = 2**63 - 1


def _bound(value: float | None) -> str:
    """A bound as users type it: 2147483647, not 2.14748e+09 ("%g" keeps 6 digits); 0.5 stays 0.5."""
    if value is not None and float(value).is_integer():
        return str(int(value))
    return f"{value:g}"


def number(
    kind: type[int] | type[float] = float,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> Callable[[str], int | float]:
    """A validator parsing `kind` and checking the bounds: e.g. number(int, ge=1, le=64) -> "must be 1-64".

    Floats must be finite: "inf" parses, but no duration or size means it, and it overflows timers downstream."""
    noun = "an integer" if kind is int else "a number"
    if ge is not None and le is not None:
        rule = f"must be {_bound(ge)}-{_bound(le)}"
    elif gt is not None:
        rule = f"must be > {_bound(gt)}" + (f" and <= {_bound(le)}" if le is not None else "")
    elif ge is not None:
        rule = f"must be >= {_bound(ge)}"
    else:
        rule = f"must be <= {_bound(le)}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):  # (math.isfinite overflows on huge ints)
            raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
        if (gt is not None and not value > gt) or (ge is not None and value < ge) or (le is not None and value > le):
            raise argparse.ArgumentTypeError(f"{rule}: {text!r}")
        return value

    parse.__name__ = f"{kind.__name__}_value"  # argparse names the type in "invalid ... value" messages
    return parse


def job_id(text: str) -> str:
    """A job id as the daemons take it (stripped), refused as they would refuse it: a trace naming another matches
    nothing, and a process registering with one is refused (dyno.request_limits)."""
    job = text.strip()
    if not job:
        raise argparse.ArgumentTypeError("must not be empty")
    if not job_id_ok(job):
        raise argparse.ArgumentTypeError(f"{JOB_ID_RULE}: {text[:40]!r}" + ("..." if len(text) > 40 else ""))
    return job


def nonempty_path(text: str) -> Path:
    """A file or folder option's value; empty is refused: Path("") is ".", so `--output-dir "$UNSET"` wrote into the
    current folder and `--hostfile ""` read "." (a folder), each without saying that the value was empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return Path(text)
