"""Checks on the text of the traceEvents array that the batches' parser does not see whole: the size cap of one
element (or of the metadata, or of the text between two elements), a partial element's text, and the gaps between
elements. Used by ``jsonscan``, which owns the cap (``jsonscan.MAX_ELEMENT_BYTES``) and passes it in.
"""

from __future__ import annotations

import orjson

from dyno.trace_analysis.jsonerrors import ScanError, byte_of_char, invalid_element_reason

__all__ = ["END_OF_DATA", "WS", "gap_check", "too_large", "check_meta", "invalid_carry"]

WS = b" \t\r\n"  # JSON whitespace
END_OF_DATA = "unexpected end of data"  # orjson's message for valid JSON that stops short


def gap_check(gap: bytes | bytearray, gap_at: int, need_comma: bool, element_follows: bool) -> int:
    """Check the text ``gap`` (at file offset ``gap_at``) that lies between two elements, or between an element and
    the array's "[" or "]", outside the batches the scan decodes; return how many values it holds (scalars: the scan
    batches only objects and arrays). ``need_comma``: an element ends right before it; ``element_follows``: an
    element starts right after it (else the array ends). Raises ScanError at the first byte that is not JSON."""
    chars = gap.translate(None, WS)
    if chars == (b"," if need_comma and element_follows else b""):  # the common case: one comma, or nothing
        return 0
    text = bytes(gap)
    head = b"["
    if need_comma:  # the comma after the previous element is JSON's own: "[0" stands for that element
        head = b"[0"
    tail = b"0]" if element_follows else b"]"  # and "0" for the element after
    try:
        values = orjson.loads(head + text + tail)
    except orjson.JSONDecodeError as e:
        at = gap_at + byte_of_char(head + text, e.pos) - len(head)
        raise ScanError(f"invalid JSON in traceEvents (at byte {max(at, gap_at)} of the file): {e.msg}") from None
    return len(values) - need_comma - element_follows


def too_large(what: str, n: int, cap: int) -> ScanError:
    """The error for a value of at least ``n`` bytes over the cap of ``cap`` bytes (``what`` names the value)."""
    limit = f"{cap >> 20} MiB" if cap % (1 << 20) == 0 else f"{cap} bytes"
    return ScanError(
        f"{what} larger than {limit} (at least {n} bytes, where a trace event is under 1 MiB): the file is corrupt "
        "or was not written by a profiler"
    )


def check_meta(meta: bytearray, cap: int) -> None:
    """Raise ScanError when the metadata collected so far is over the cap of ``cap`` bytes."""
    if len(meta) > cap:
        raise too_large("metadata outside traceEvents", len(meta), cap)


def invalid_carry(carry: bytearray, carry_at: int) -> ScanError | None:
    """The error for a partial element ``carry`` (at file offset ``carry_at``) that the parser rejects before its
    end; None when its text is valid as far as it goes."""
    try:
        orjson.loads(carry)
    except orjson.JSONDecodeError as e:
        if e.msg != END_OF_DATA:
            return ScanError(invalid_element_reason(carry, e, "element", carry_at))
    return None
