"""XID critical errors of every device, counted from one NVML event set drained without waiting each tick."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dyno.daemon.samplers.nvml_calls import FAILED, NvmlCalls

__all__ = ["XidCount", "XidEvents"]

_MAX_EVENTS_PER_TICK = 256  # bound the XID drain so an event storm cannot stall a tick


@dataclass(slots=True)
class XidCount:
    """One device's XID errors since dynod started; `registered`: the device's events reach the event set."""

    registered: bool = False
    count: int = 0
    last: int | None = None


def _handle_key(handle: object) -> int:
    """A hashable identity for a device handle: the pointer value of real ctypes handles (event data carries a
    fresh pointer object for the same device), the object identity otherwise."""
    try:
        return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)  # type: ignore[arg-type]
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


class XidEvents:
    """The event set every device that supports XID events is registered with."""

    def __init__(self, calls: NvmlCalls, event_set: Any, by_handle: dict[int, XidCount]) -> None:
        self._calls = calls
        self._event_set = event_set
        self._by_handle = by_handle

    @classmethod
    def set_up(cls, calls: NvmlCalls, devices: Sequence[tuple[int, Any, XidCount]]) -> XidEvents | None:
        """Register each (index, handle, count) device; None when none could be (the reason stays with `calls`
        under the key "xid")."""
        m = calls.m
        xid_bit = getattr(m, "nvmlEventTypeXidCriticalError", 0)
        if not xid_bit:
            return None
        event_set = calls.call_optional("nvmlEventSetCreate")
        if event_set is None:
            return None
        for index, handle, count in devices:
            supported = calls.query(index, "xid", "nvmlDeviceGetSupportedEventTypes", handle)
            if supported is None or not supported & xid_bit:
                calls.never_ask(index, "xid", "XID events not supported", keep_first=True)
                continue
            registered = calls.query(
                index, "xid", "nvmlDeviceRegisterEvents", handle, xid_bit, event_set, default=FAILED
            )
            if registered is FAILED:
                # even a transient failure leaves this device out: a count that misses events would mislead
                calls.never_ask(index, "xid", "registering XID events failed", keep_first=True)
                continue
            count.registered = True
        if not any(count.registered for _, _, count in devices):
            calls.call_optional("nvmlEventSetFree", event_set)
            return None
        return cls(calls, event_set, {_handle_key(handle): count for _, handle, count in devices})

    def drain(self) -> None:
        """Count the events that arrived since the last tick (at most _MAX_EVENTS_PER_TICK of them)."""
        m = self._calls.m
        for _ in range(_MAX_EVENTS_PER_TICK):
            try:
                data = m.nvmlEventSetWait(self._event_set, 0)  # 0 ms: return at once (NVMLError_Timeout) if none
            except m.NVMLError:
                return
            count = self._by_handle.get(_handle_key(data.device))
            if count is not None and data.eventType & m.nvmlEventTypeXidCriticalError:
                count.count += 1
                count.last = int(data.eventData)

    def free(self) -> None:
        self._calls.call_optional("nvmlEventSetFree", self._event_set)
