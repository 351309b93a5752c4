"""A trace's processes in pages that each fit a stock gRPC client's 4 MiB (GetTrace, CancelTrace, StartTrace).

A job-wide trace has a ProcessTrace per process (up to --max-processes, 65536), each with a path and error and
waiting texts of up to 4 KiB. When the whole list would not fit in one answer, every text is first cut to its
share of the bound (at least MIN_TEXT_BYTES, ending in "…", the same for every process), and what still does not
fit comes in further pages. A page token is the last pid a page carried; the next page is the processes after it
in the trace's own order (a trace's list only grows: a process that reports itself later is appended).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from dyno.daemon.answer_bounds import cut_text
from dyno.v1 import dyno_pb2

__all__ = ["MAX_TOKEN_CHARS", "MIN_TEXT_BYTES", "BadTraceToken", "TracePage", "page"]

MIN_TEXT_BYTES = 256  # an error or waiting text is never cut shorter: past that, more pages
MAX_TOKEN_CHARS = 64  # a token this daemon writes is ~20 characters
_TEXTS = ("error", "waiting")
_ITEM_OVERHEAD = 4  # a ProcessTrace's field tag and length (< 2 MiB: at most 3 bytes of varint)
_TOKEN_ROOM = MAX_TOKEN_CHARS + 4  # a next_page_token field, its tag and length included


class BadTraceToken(ValueError):
    """Not a next_page_token of this trace."""


@dataclass(frozen=True)
class TracePage:
    processes: list[dyno_pb2.ProcessTrace]
    next_page_token: str  # empty: the last page


def page(processes: Sequence[dyno_pb2.ProcessTrace], page_token: str, max_bytes: int, other_bytes: int) -> TracePage:
    """The page of `processes` (fresh messages of the whole trace, their texts cut here when needed) that
    `page_token` names, in at most `max_bytes` with the answer's `other_bytes` (its other fields)."""
    start = _start(processes, page_token)
    room = max_bytes - other_bytes - _TOKEN_ROOM
    share = _text_share(processes, room)
    out: list[dyno_pb2.ProcessTrace] = []
    size = 0
    for p in processes[start:]:
        if share is not None:
            for f in _TEXTS:
                value = getattr(p, f)
                if len(value.encode()) > share:
                    setattr(p, f, cut_text(value, share))
        item = p.ByteSize() + _ITEM_OVERHEAD
        if out and size + item > room:
            return TracePage(out, _encode(out[-1].pid))
        out.append(p)
        size += item
    return TracePage(out, "")


def _text_share(processes: Sequence[dyno_pb2.ProcessTrace], room: int) -> int | None:
    """What each text is cut to when the whole trace would not fit in one page; None when it fits."""
    sizes = [p.ByteSize() + _ITEM_OVERHEAD for p in processes]
    if sum(sizes) <= room:
        return None
    texts = sum(len(getattr(p, f).encode()) for p in processes for f in _TEXTS)
    rest = sum(sizes) - texts
    return max(MIN_TEXT_BYTES, (room - rest) // (len(_TEXTS) * len(processes)))


def _start(processes: Sequence[dyno_pb2.ProcessTrace], page_token: str) -> int:
    if not page_token:
        return 0
    after = _decode(page_token)
    for i, p in enumerate(processes):
        if p.pid == after:
            return i + 1
    raise BadTraceToken("page_token: not a next_page_token of this trace")


def _encode(pid: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": pid}).encode()).decode()


def _decode(token: str) -> int:
    try:
        pid = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))["after"]
    except (ValueError, TypeError, KeyError, binascii.Error, UnicodeEncodeError):
        raise BadTraceToken("page_token: not a next_page_token of this trace") from None
    if not isinstance(pid, int) or isinstance(pid, bool):
        raise BadTraceToken("page_token: not a next_page_token of this trace")
    return pid
