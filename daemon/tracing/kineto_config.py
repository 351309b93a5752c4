"""libkineto's on-demand config lines: `KEY=value` per line, as its config loader parses them, and a trace
request's config (see ../shared/KINETO_IPC.md). A value that would corrupt the parse is refused, never sent."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ConfigValueError", "build_config", "trace_config"]


class ConfigValueError(ValueError):
    """A key or value that would make a malformed libkineto config line."""


_KEY_RE = re.compile(r"\A[A-Z][A-Z0-9_]*\Z")
_INT32_MAX = 2**31 - 1


def _format_value(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not 0 <= value <= 2**63 - 1:
            raise ConfigValueError(f"{key}: integer {value} out of range")
        return str(value)
    if isinstance(value, (str, Path)):
        text = str(value)
        # One '=' per line, '#' starts a comment, a newline splits the line: any of them corrupts the parse.
        bad = sorted({c for c in text if c in "=#\n\r\0"})
        if bad:
            raise ConfigValueError(f"{key}: value {text!r} contains {bad!r}")
        if text != text.strip() or not text:
            raise ConfigValueError(f"{key}: empty value or surrounding whitespace in {text!r}")
        return text
    raise ConfigValueError(f"{key}: unsupported value type {type(value).__name__}")


def build_config(settings: Mapping[str, object]) -> str:
    """KEY=VALUE lines; raises ConfigValueError rather than ever emitting a line libkineto would reject."""
    lines = []
    for key, value in settings.items():
        if not _KEY_RE.match(key):
            raise ConfigValueError(f"invalid config key {key!r}")
        lines.append(f"{key}={_format_value(key, value)}")
    return "\n".join(lines)


def trace_config(
    *,
    trace_id: str,
    log_file: Path,
    duration_ms: int | None = None,
    iterations: int | None = None,
    start_time_ms: int | None = None,
    start_iteration_roundup: int | None = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    with_stack: bool = False,
    with_flops: bool = False,
    with_modules: bool = False,
) -> str:
    """The on-demand activity config for one trace. libkineto inserts `_<pid>` before `.pt.trace.json`."""
    if (duration_ms is None) == (iterations is None):
        raise ConfigValueError("exactly one of duration_ms and iterations")
    s: dict[str, object] = {"ACTIVITIES_LOG_FILE": log_file}
    if iterations is not None:
        if not 1 <= iterations <= _INT32_MAX:
            raise ConfigValueError(f"iterations out of range: {iterations}")
        s["PROFILE_START_ITERATION"] = 0
        s["PROFILE_START_ITERATION_ROUNDUP"] = max(1, start_iteration_roundup or 1)
        s["ACTIVITIES_ITERATIONS"] = iterations
    else:
        assert duration_ms is not None
        if not 1 <= duration_ms <= _INT32_MAX:
            raise ConfigValueError(f"duration_ms out of range: {duration_ms}")
        s["ACTIVITIES_DURATION_MSECS"] = duration_ms
        if start_time_ms:
            s["PROFILE_START_TIME"] = start_time_ms
    # Without a start time libkineto waits ACTIVITIES_WARMUP_PERIOD_SECS (default 5 s) first.
    s["ACTIVITIES_WARMUP_PERIOD_SECS"] = 0
    s["REQUEST_TRACE_ID"] = trace_id
    s["PROFILE_REPORT_INPUT_SHAPES"] = record_shapes
    s["PROFILE_PROFILE_MEMORY"] = profile_memory
    s["PROFILE_WITH_STACK"] = with_stack
    s["PROFILE_WITH_FLOPS"] = with_flops
    s["PROFILE_WITH_MODULES"] = with_modules
    return build_config(s)


# -- the endpoint ---------------------------------------------------------------------------------------------
