"""When periodic profiling traces a job, and the id of each such trace: derived from the job id and the wall clock
only, so that every host of a job picks the same moments and the same trace ids without talking to the others.

Moment k of job J is ``k * interval + offset(J)`` in unix ms, where offset(J) is a stable hash of J (SHA-256, not
Python's salted ``hash()``) modulo the interval: the per-job jitter that keeps the jobs of a fleet from all tracing
at once. The trace id of a moment is ``periodic-<job>-<UTC %Y%m%dT%H%M%SZ of the moment>``; a job id that is no
valid trace id part ([A-Za-z0-9_.-], at most 38 characters) maps deterministically to its sanitised prefix and a short
stable hash of the whole id, so that the trace id always obeys dyno.trace_ids' rule.
"""

from __future__ import annotations

import hashlib
import time

from dyno.trace_ids import is_trace_id, sanitized
from dyno.trace_summary import PERIODIC_PREFIX

__all__ = ["MAX_JOB_PART", "MIN_INTERVAL_MS", "Schedule", "job_offset_ms", "periodic_trace_id", "trace_id_job_part"]

# A trace id is at most 64 characters: "periodic-" (9) + job part + "-" (1) + "YYYYmmddTHHMMSSZ" (16).
MAX_JOB_PART = 64 - len(PERIODIC_PREFIX) - 1 - 16
_HASH_HEX = 8  # the hash suffix of a job id that is no valid part as it is
# Two moments of a job are at least a second apart, so their trace ids (to the second) differ.
MIN_INTERVAL_MS = 1000


def _digest(job_id: str) -> bytes:
    return hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()


def job_offset_ms(job_id: str, interval_ms: int) -> int:
    """The job's offset within the interval: 0 <= offset < interval_ms, the same on every host and every run."""
    return int.from_bytes(_digest(job_id)[:8], "big") % interval_ms


def trace_id_job_part(job_id: str) -> str:
    """The job id as a trace id part: itself when it is one ([A-Za-z0-9_.-]{1,38}, not only dots), else its
    sanitised prefix, "-" and 8 hex digits of its SHA-256 (deterministic; two ids that sanitise alike still differ)."""
    if len(job_id) <= MAX_JOB_PART and is_trace_id(job_id):
        return job_id
    prefix = sanitized(job_id)[: MAX_JOB_PART - _HASH_HEX - 1].strip(".")
    return f"{prefix}-{_digest(job_id).hex()[:_HASH_HEX]}" if prefix else _digest(job_id).hex()[:_HASH_HEX]


def periodic_trace_id(job_id: str, moment_ms: int) -> str:
    """``periodic-<job part>-<UTC time of the moment, to the second>Z``: a valid trace id (dyno.trace_ids)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moment_ms // 1000))
    return f"{PERIODIC_PREFIX}{trace_id_job_part(job_id)}-{stamp}"


class Schedule:
    """The moments of every job for one interval (``interval_ms`` >= MIN_INTERVAL_MS). Pure: no clock of its own."""

    def __init__(self, interval_ms: int) -> None:
        if interval_ms < MIN_INTERVAL_MS:
            raise ValueError(f"interval must be at least {MIN_INTERVAL_MS} ms, not {interval_ms}")
        self.interval_ms = interval_ms

    def offset_ms(self, job_id: str) -> int:
        return job_offset_ms(job_id, self.interval_ms)

    def moment_at_or_before(self, job_id: str, now_ms: int) -> int:
        """The job's latest moment that is not after `now_ms`."""
        off = self.offset_ms(job_id)
        return (now_ms - off) // self.interval_ms * self.interval_ms + off

    def next_moment(self, job_id: str, now_ms: int) -> int:
        """The job's first moment after `now_ms`."""
        return self.moment_at_or_before(job_id, now_ms) + self.interval_ms

    def trace_id(self, job_id: str, moment_ms: int) -> str:
        return periodic_trace_id(job_id, moment_ms)
