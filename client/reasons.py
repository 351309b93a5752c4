"""The client's reading of a daemon's machine-readable error reason (dyno.error_reasons)."""

from __future__ import annotations

from dyno.error_reasons import ErrorReason

__all__ = ["is_reason"]


def is_reason(reason: str, wanted: ErrorReason, message: str, old_text: str) -> bool:
    """Whether an error's `reason` is `wanted`. A daemon that sends no reason (older than ErrorInfo reasons) is
    matched by `old_text` in its `message`: the only place the client reads a daemon's wording."""
    if reason:
        return reason == wanted.value
    return old_text in message
