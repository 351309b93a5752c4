"""Keeps a unary answer within what a stock gRPC client receives (4 MiB), whatever the daemon holds.

ListProcesses (up to registry.MAX_PROCESSES processes, each with a command line of up to 4 KiB) and the TraceStatus
of a job-wide trace (a process each, with error and waiting texts of up to 4 KiB) can encode to tens of MB. Their
structure is small (pids, states, paths): past the bound, the longest free texts are shortened to one common
length (ending in "…"), the same for every item, until the answer fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import Message

__all__ = ["ELLIPSIS", "cut_text", "fit_texts"]

ELLIPSIS = "…"


def cut_text(text: str, max_bytes: int) -> str:
    """`text` shortened to at most `max_bytes` of UTF-8, "…" included (never splitting a character)."""
    room = max_bytes - len(ELLIPSIS.encode())
    if room <= 0:
        return ""
    return text.encode()[:room].decode(errors="ignore") + ELLIPSIS


def fit_texts(answer: Message, items: str, texts: Sequence[str], max_bytes: int) -> bool:
    """Shorten the `texts` fields of each message in `answer`'s repeated field `items` until `answer` encodes to
    at most `max_bytes`; True when any was shortened. Answers within the bound are left as they are."""
    if answer.ByteSize() <= max_bytes:
        return False
    entries = list(getattr(answer, items))
    cap = max((len(getattr(e, f).encode()) for e in entries for f in texts), default=0)
    while answer.ByteSize() > max_bytes and cap > 0:
        cap //= 2
        for e in entries:
            for f in texts:
                value = getattr(e, f)
                if len(value.encode()) > cap:
                    setattr(e, f, cut_text(value, cap))
    return True
