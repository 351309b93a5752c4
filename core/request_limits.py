"""The bounds dynod puts on the dyno.v1 requests a client can send, in one place for both sides.

The daemon refuses a request beyond them with INVALID_ARGUMENT naming the field (other clients exist: it keeps
its own checks); dyno-cli checks the options that reach them before calling any host, so such a value is a usage
error (exit 2, the option and the allowed range named) instead of a failure on every host after the fan-out.
"""

from __future__ import annotations

__all__ = [
    "JOB_ID_RULE",
    "MAX_DURATION_MS",
    "MAX_FUTURE_START_MS",
    "MAX_ITERATIONS",
    "MAX_JOB_ID",
    "MAX_METRICS_LIMIT",
    "MAX_METRICS_PAGE_BYTES",
    "MAX_METRICS_RESPONSE_BYTES",
    "MAX_NAME_PATTERN_LEN",
    "MAX_NAME_PATTERNS",
    "MAX_PAST_START_MS",
    "MAX_PIDS",
    "job_id_ok",
]

# TraceRequest (StartTrace)
MAX_DURATION_MS = 10 * 60 * 1000  # duration_ms: 1..this
MAX_ITERATIONS = 100_000  # iterations and start_iteration_roundup: 1..this
MAX_PIDS = 1024  # pids: at most this many
MAX_JOB_ID = 128  # job_id: at most this many printable characters (Register's job_id too)
# start_time_ms: at most 10 s in the past (a cluster's hosts start a little apart and their clocks differ). libkineto
# itself refuses any past PROFILE_START_TIME, so dynod drops one that is past at pickup (daemon/tracing/kineto_side.py).
MAX_PAST_START_MS = 10_000
MAX_FUTURE_START_MS = 3600 * 1000  # start_time_ms: at most 1 h ahead
JOB_ID_RULE = f"at most {MAX_JOB_ID} printable characters"

# GetMetricsRequest / StreamMetricsRequest
MAX_METRICS_LIMIT = 100_000  # limit: 0..this (0: all)
# One GetMetrics answer (a page) is at most this many encoded bytes: a stock gRPC client (grpcio, @grpc/grpc-js,
# grpc-go) receives at most 4 MiB, less the room of a message's framing kept free. A range goes on in further pages.
MAX_METRICS_PAGE_BYTES = 4 * 1024 * 1024 - 64 * 1024
# dyno-cli gathers at most this many bytes of samples from one daemon's pages (half of what it receives): an hour of
# 1 s samples of 8 GPUs is ~110 MB, ~6x that as Python objects and more as JSON. Beyond it the host fails saying how
# many of the newest samples fit.
MAX_METRICS_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_NAME_PATTERNS = 256  # names: at most this many patterns
MAX_NAME_PATTERN_LEN = 200  # names: each pattern 1..this characters


def job_id_ok(job_id: str) -> bool:
    """A job id a trace request can name (registration refuses any other: such a process could never be traced)."""
    return len(job_id) <= MAX_JOB_ID and job_id.isprintable()
