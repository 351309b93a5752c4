"""NVML calls that never raise: a failed call gives a default and its reason, and a counter that can never work on
a device (not supported, no permission, function missing in this driver or binding) is not asked again, which
keeps a tick cheap."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["FAILED", "LOST_ERROR", "NvmlCalls"]

log = logging.getLogger("dyno.daemon.samplers.nvml")

FAILED: Any = object()  # query()'s result for a failed call when None is a valid success value

# The error NVML gives for every call on a GPU that fell off the bus (Xid 79) until the driver is reset
LOST_ERROR = "NVMLError_GpuIsLost"

# Error class names (as pynvml generates them from NVML_ERROR_*) after which a counter is not asked again.
_PERMANENT_ERRORS = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")


class NvmlCalls:
    """Calls into one pynvml module, remembering per (device index, counter key) the counters that cannot work."""

    def __init__(self, m: Any) -> None:
        self.m = m
        self._skip: dict[tuple[int, str], str] = {}  # (device index, counter key) -> permanent reason
        self._logged: set[tuple[int, str]] = set()
        self._permanent = tuple(c for c in (getattr(m, n, None) for n in _PERMANENT_ERRORS) if isinstance(c, type))
        self._lost_value = getattr(m, "NVML_ERROR_GPU_IS_LOST", None)
        # device indices a call answered with LOST_ERROR since the caller last discarded them (one tick's worth)
        self.lost: set[int] = set()

    def query(
        self,
        index: int,
        key: str,
        fn_name: str,
        *args: Any,
        missing: dict[str, str] | None = None,
        default: Any = None,
    ) -> Any:
        """Call pynvml.<fn_name>(*args); `default` (and the reason in `missing[key]`) when it fails. Never
        raises an NVML error. Counters that can never work on this device are not called again. Pass
        default=FAILED for functions that return None on success."""
        skipped = self._skip.get((index, key))
        if skipped is not None:
            if missing is not None:
                missing[key] = skipped
            return default
        fn: Callable[..., Any] | None = getattr(self.m, fn_name, None)
        if fn is None:
            self._fail(index, key, f"{fn_name} not in this pynvml", True, missing)
            return default
        try:
            return fn(*args)
        except self.m.NVMLError as exc:
            lost = self._lost_value is not None and getattr(exc, "value", None) == self._lost_value
            if lost:
                self.lost.add(index)
            self._fail(index, key, f"{type(exc).__name__}: {exc}", isinstance(exc, self._permanent), missing, lost)
            return default

    def call_optional(self, fn_name: str, *args: Any) -> Any:
        """A call that concerns no device (driver version, event sets, freeing): None when it fails."""
        return self.query(-1, fn_name, fn_name, *args)

    def never_ask(self, index: int, key: str, reason: str, *, keep_first: bool = False) -> None:
        """Do not ask `key` of device `index` again; `reason` is what query() reports for it from now on."""
        if keep_first:
            self._skip.setdefault((index, key), reason)
        else:
            self._skip[(index, key)] = reason

    def why_not(self, index: int, key: str, otherwise: str) -> str:
        """Why `key` is never asked of device `index`, else `otherwise`."""
        return self._skip.get((index, key), otherwise)

    def _fail(
        self, index: int, key: str, reason: str, permanent: bool, missing: dict[str, str] | None, lost: bool = False
    ) -> None:
        if permanent:
            self._skip[(index, key)] = reason
        if missing is not None:
            missing[key] = reason
        # once per counter, not every tick; a lost GPU fails every counter: the sampler says it once for the GPU
        if (index, key) not in self._logged and not lost:
            self._logged.add((index, key))
            log.info("gpu %d: %s unavailable: %s", index, key, reason)
