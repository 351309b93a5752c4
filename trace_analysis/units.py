"""Human-readable durations, sizes and names for finding titles and reports (one place, so every rule and every
report format writes the same units)."""

from __future__ import annotations

__all__ = ["clip_name", "fmt_bytes", "fmt_count", "fmt_ts", "fmt_us"]


def fmt_us(us: float) -> str:
    """Human duration from µs: 0.4 µs, 850 µs, 12.3 ms, 4.56 s."""
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.2f} s"
    if a >= 1e3:
        return f"{us / 1e3:.1f} ms"
    if 0 < a < 9.95:  # torch writes µs with ns decimals: a 0.4 µs op is not "0 µs"
        return f"{us:.1f} µs"
    return f"{us:.0f} µs"


def fmt_bytes(n: float) -> str:
    """Human size in binary units: 512 B, 15.0 KiB, 233.1 MiB, 1.50 GiB (a few KiB are not "0.0 MiB")."""
    a = abs(n)
    if a < 1024:
        return f"{n:.0f} B"
    if a < 1024**2:
        return f"{n / 1024:.1f} KiB"
    if a < 1024**3:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / 1024**3:.2f} GiB"


def fmt_ts(ts_us: float) -> str:
    """A trace timestamp (µs, the trace's own clock) as written to be searched for: whole µs without decimals
    (Kineto's usual form, 1694039994139319), ns-resolution ones with their three decimals."""
    return f"{ts_us:.0f}" if float(ts_us).is_integer() else f"{ts_us:.3f}"


def fmt_count(key: str, value: float) -> str:
    """``key=value`` for a finding's evidence count, in the unit its key names (the rules' convention): ``*_us`` a
    duration and ``*_bytes`` a size (the suffix dropped: the value carries the unit), ``bytes`` a size, ``*share*``
    / ``*utilization`` a percentage, else a number ("window_us=1.0742e+06" and "utilization=0.355082" were what
    the HTML showed)."""
    if value != value:  # NaN
        return f"{key}=-"
    if key.endswith("_us"):
        return f"{key[:-3]}={fmt_us(value)}"
    if key == "bytes" or key.endswith("_bytes"):
        return f"{key.removesuffix('_bytes')}={fmt_bytes(value)}"
    if "share" in key or key.endswith("utilization"):
        return f"{key}={100 * value:.1f}%"
    return f"{key}={value:,.0f}" if float(value).is_integer() else f"{key}={value:,.3g}"


def clip_name(name: str, limit: int) -> str:
    """``name`` cut to ``limit`` characters, with "…" as the last one when cut: a C++ kernel name cut mid-template
    must not read as the whole name (nor run into the text that follows it)."""
    return name if len(name) <= limit else name[: max(limit - 1, 0)] + "…"
