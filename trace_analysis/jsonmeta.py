"""The metadata of a Chrome trace (its top-level object without the traceEvents elements) and its key: where the
streamed ``"traceEvents"`` key is, by the scan or by a speculative parse of the first block; the fast end cut
that completes and parses the metadata after the array; which value a repeated key keeps; and the metadata's
parse errors placed in the file. Used by ``jsonscan``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sized
from typing import Any

import orjson

from dyno.trace_analysis.jsonelements import END_OF_DATA, WS
from dyno.trace_analysis.jsonerrors import ScanError, after_document_reason, byte_of_char

__all__ = ["KEY", "ends_with_key", "events_start", "array_end_cut", "invalid_meta", "last_value", "meta_error"]

KEY = b'"traceEvents"'
_BSLASH = 92
_EVENTS_OPEN = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')


def ends_with_key(meta: bytes | bytearray, buf: bytes, lo: int, p: int) -> bool:
    """Whether the text ``meta + buf[lo:p]`` ends with ``"traceEvents"`` and a colon (JSON whitespace around it).
    Reads only its end: a window that grows while it holds nothing but whitespace (copying all the text before each
    bracket of the metadata would make a metadata of many arrays quadratic)."""
    n = 64
    while True:
        whole = n >= len(meta) + p - lo
        if p - n >= lo:
            tail = buf[p - n : p]
        else:
            tail = bytes(meta[max(0, len(meta) - (n - (p - lo))) :]) + buf[lo:p]
        t = tail.rstrip(WS)
        if t.endswith(b":"):
            t = t[:-1].rstrip(WS)
            if len(t) >= len(KEY) or whole:
                return t.endswith(KEY)
        elif t or whole:
            return False
        n *= 4


def events_start(block: bytes) -> int:
    """Index just past the ``[`` of the top-level ``"traceEvents": [`` in the first block of an object, found
    without the structural scan; -1 when that cannot be shown (the caller scans).

    Why it is safe: the text P before the first ``"traceEvents"`` is followed by ``"traceEvents":[]}`` and parsed.
    JSON lexing is deterministic, so the state after P is the same in the file. If P ended inside a string, the
    appended quote would close it and ``traceEvents`` would follow outside a string (invalid), unless P ends with
    a backslash (excluded); outside a string, ``"traceEvents": []}`` then ending the document is valid only at the
    key position of the root object. So a successful parse proves the key is the root's, as the scan would find.
    """
    k = block.find(KEY)
    if k <= 0 or block[k - 1] == _BSLASH:
        return -1
    m = _EVENTS_OPEN.match(block, k)
    if m is None:
        return -1
    try:
        orjson.loads(block[:k] + b'"traceEvents":[]}')
    except orjson.JSONDecodeError:
        return -1
    return m.end()


def array_end_cut(
    buf: bytes | bytearray,
    lo: int,
    meta: bytes | bytearray,
    fast_decode: Callable[[bytes | bytearray | memoryview], Sized | None],
) -> tuple[Sized, dict[str, Any], memoryview, bytes] | None:
    """The rest of an object's events array without the scan: ``buf[lo:]`` is ``[`` + every remaining element +
    ``]`` + the metadata after the array. Cut at the array's ``]``, the batch (a view of ``buf``, no copy) is
    decoded and the metadata completed and parsed: returns (decoded batch, metadata, batch, the text after the
    array), or None (the caller scans).

    Candidates are the ``]`` right after a ``}``, from the right. As for the fast cut, the batch is valid JSON only
    if its ``]`` closes the array (it starts at an element boundary); the rest must then complete the metadata as
    the scan would (and not hold a second traceEvents array, which the scan would read).
    """
    r = len(buf)
    for _ in range(4):  # the events' ] is nearly always the last or next to last ] of a file
        r = buf.rfind(b"]", lo, r)
        if r <= lo:
            return None
        j = r - 1
        while buf[j] in WS:  # (no copy of buf: it holds the whole rest of the file)
            j -= 1
        if buf[j] != 125:  # }
            continue
        rest = bytes(buf[r + 1 :])
        if KEY in rest:
            return None
        try:
            parsed = orjson.loads(bytes(meta) + rest)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(parsed, dict):
            return None
        batch = memoryview(buf)[lo : r + 1]
        items = fast_decode(batch)
        if items is None:
            batch.release()  # (a bytearray cannot be resized while a view of it exists)
            return None
        return items, parsed, batch, rest
    return None


def invalid_meta(meta: bytearray, events_at: int, n_bytes: int, bom: int) -> ScanError | None:
    """As ``invalid_carry``, for the metadata of a file that ends inside it."""
    try:
        orjson.loads(meta)
    except orjson.JSONDecodeError as e:
        if e.msg != END_OF_DATA:
            return ScanError(meta_error(bytes(meta), e, events_at, n_bytes, bom))
    return None


def last_value(meta: bytearray, events_at: int) -> Any:
    """When the metadata after the streamed array's placeholder (``[]`` ending at ``events_at``) holds another
    traceEvents key, which value JSON keeps: parsed again with the placeholder as null, the key's value is still
    null only if the placeholder is the last one (the streamed events stand: None is returned)."""
    again = orjson.loads(bytes(meta[: events_at - 2]) + b"null" + bytes(meta[events_at:]))
    return again.get("traceEvents")


def meta_error(meta: bytes, e: orjson.JSONDecodeError, events_at: int, n_bytes: int, bom: int) -> str:
    """The metadata's parse error with the file's byte offset: ``meta`` is the file without the traceEvents
    elements, so orjson's position (in characters of ``meta``) is not one in the file. Before the elements,
    meta's bytes are the file's (less a BOM); from ``events_at`` on, they are the file's last ones."""
    pos = byte_of_char(meta, e.pos)
    offset = n_bytes - (len(meta) - pos) if 0 <= events_at <= pos else pos + bom
    if e.msg == "unexpected content after document":
        return after_document_reason(meta[pos:], offset)
    return f"invalid JSON outside traceEvents at byte {offset}: {e.msg}"
