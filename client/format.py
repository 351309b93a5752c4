"""Plain-text tables and value formatting for dyno-cli (no dependencies, stable for tests)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

__all__ = ["table", "human_bytes", "human_duration", "format_value", "format_labels"]


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def human_duration(seconds: float) -> str:
    """A duration to read at a glance: 45s, 12m05s, 5h03m, 3d04h (a daemon up for a month showed "up 2592000 s")."""
    rest = int(max(0.0, seconds))
    if rest < 120:
        return f"{rest}s"
    minutes, rest = divmod(rest, 60)
    if minutes < 120:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_value(name: str, value: float) -> str:
    if "bytes_per_second" in name:
        return human_bytes(value) + "/s"
    if name.endswith("_bytes"):
        return human_bytes(value)
    if name.endswith("_percent"):
        return f"{value:.1f}%"
    if name.endswith("uptime_seconds"):  # "5.774e+04" said 16 hours to nobody
        return human_duration(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def format_labels(labels: dict[str, str] | Sequence[tuple[str, str]]) -> str:
    items = sorted(labels.items()) if isinstance(labels, dict) else sorted(labels)
    return ",".join(f"{k}={v}" for k, v in items)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    text: Collection[str] = (),
    max_width: int | None = None,
) -> str:
    """Left-aligned columns separated by two spaces; numbers are right-aligned, except in the columns named in
    `text` (paths or names that may start with a digit). `max_width` (a terminal's width): the last column is cut
    (ending in "...") so that lines fit, down to a few characters; what is still too wide wraps."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    if max_width is not None and cells and sum(widths) + 2 * (len(widths) - 1) > max_width:
        last = max(len(headers[-1]), 8, max_width - sum(widths[:-1]) - 2 * (len(widths) - 1))
        if last < widths[-1]:
            widths[-1] = last
            for row in cells:
                if len(row) == len(widths) and len(row[-1]) > last:
                    row[-1] = row[-1][: last - 3] + "..."

    def fmt(row: Sequence[str], header: bool = False) -> str:
        parts = []
        for i, c in enumerate(row):
            numeric = not header and c[:1].isdigit() and headers[i] not in text
            parts.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    lines = [fmt(headers, header=True), fmt(["-" * w for w in widths], header=True)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)
