"""The trace options shared by TraceRequest (dyno.proto) and TraceConfig (agent.proto), in one place.

Both messages carry the same `window` oneof (duration_ms | iterations), `start` oneof (start_time_ms |
start_iteration_roundup) and profiler flags; the daemon holds them in its TraceSpec, the agent in its AgentTraceSpec.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROFILER_FLAGS", "options_from_pb", "options_to_pb", "profiler_flags"]

PROFILER_FLAGS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")
_ONEOF_FIELDS = {"window": ("duration_ms", "iterations"), "start": ("start_time_ms", "start_iteration_roundup")}


def profiler_flags(obj: Any) -> dict[str, bool]:
    """The profiler flags of a spec, a message or parsed arguments, as keyword arguments (same names everywhere,
    torch's profiler and libkineto's config builder included)."""
    return {name: bool(getattr(obj, name)) for name in PROFILER_FLAGS}


def options_from_pb(msg: Any) -> dict[str, Any]:
    """Keyword arguments for a TraceSpec or AgentTraceSpec: the set member of each oneof (others None), the flags."""
    out: dict[str, Any] = profiler_flags(msg)
    for oneof, names in _ONEOF_FIELDS.items():
        chosen = msg.WhichOneof(oneof)
        for name in names:
            out[name] = getattr(msg, name) if name == chosen else None
    return out


def options_to_pb(spec: Any) -> dict[str, Any]:
    """Keyword arguments for a TraceRequest / TraceConfig from a TraceSpec or AgentTraceSpec (unset oneofs left out)."""
    out: dict[str, Any] = profiler_flags(spec)
    for names in _ONEOF_FIELDS.values():
        for name in names:
            value = getattr(spec, name)
            if value is not None:
                out[name] = value
    return out
