"""Protobuf wire-format primitives for the few messages dyno encodes or decodes by hand (see dyno.filechunks and
dyno.daemon.wire for why)."""

from __future__ import annotations

__all__ = ["len_field", "varint", "read_varint"]


def varint(n: int) -> bytes:
    """A base-128 varint; a negative int64 as its two's complement, as protobuf writes it."""
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def len_field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: its one-byte tag (field number << 3 | 2, for field numbers up to 15), the payload's
    length, the payload."""
    return bytes((tag,)) + varint(len(payload)) + payload


def read_varint(buf: bytes | memoryview, i: int) -> tuple[int, int]:
    """The varint starting at buf[i] and the index after it; ValueError when truncated or longer than 64 bits."""
    n = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7
