"""The client's reading of a daemon's machine-readable error reason (dyno.error_reasons)."""

from __future__ import annotations

from dyno.error_reasons import ErrorReason

__all__ = ["is_reason"]


def is_reason(reason: str, wanted: ErrorReason) -> bool:
    """Whether an error's machine-readable `reason` (its ErrorInfo, dyno.error_reasons) is `wanted`. The client
    never reads a daemon's wording: a daemon that sends no reason is answered without the reason's hint."""
    return reason == wanted.value
