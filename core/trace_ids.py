"""Trace ids and the host part of trace file names: one rule for the daemon (which names folders and files
after them) and the client (which checks a --trace-id before calling any host and lays out the files it fetches).
"""

from __future__ import annotations

import re
import secrets
import time

__all__ = ["TRACE_ID_RULE", "is_trace_id", "validate_trace_id", "new_trace_id", "safe_host", "sanitized"]

_TRACE_ID_RE = re.compile(r"\A[A-Za-z0-9_.-]{1,64}\Z")  # \Z: "$" would let a trailing newline through
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
TRACE_ID_RULE = "trace_id must match [A-Za-z0-9_.-]{1,64} and not be only dots"


def is_trace_id(text: str) -> bool:
    """[A-Za-z0-9_.-]{1,64} and not only dots: a single path component that names no other folder."""
    return _TRACE_ID_RE.match(text) is not None and set(text) != {"."}


def validate_trace_id(trace_id: str) -> str:
    """``trace_id`` itself; ValueError (``TRACE_ID_RULE``) unless ``is_trace_id``."""
    if not is_trace_id(trace_id):
        raise ValueError(TRACE_ID_RULE)
    return trace_id


def new_trace_id(now_s: float | None = None) -> str:
    """A fresh id: UTC time to the second and 32 random bits (two requests in one second do not collide)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now_s is None else now_s))
    return f"{stamp}-{secrets.token_hex(4)}"


def sanitized(text: str) -> str:
    """``text`` with anything outside [A-Za-z0-9_.-] (the characters of a trace id) as "_"."""
    return _UNSAFE.sub("_", text)


def safe_host(hostname: str) -> str:
    """A host name (or "host_port") as a file-name part: ``sanitized``, "host" when empty."""
    return sanitized(hostname) or "host"
