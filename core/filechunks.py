"""The FetchTraceFile stream: `dyno.v1.FileChunk` messages encoded and decoded by hand, and their checksum.

Why by hand: a trace file can be hundreds of MB. Through the protobuf runtime every MiB chunk was copied twice
more on each side (message construction + serialization on the daemon; parsing + reading the `data` field on
the client). Here the daemon joins header and data once, and the client reads the data as a memoryview into
the received bytes, writing and hashing it without a copy. The wire format is exactly `FileChunk`'s (the tests
check both directions against the protobuf runtime), so any protobuf client can still read the stream.

Why xxh3-128 and not sha256: the checksum guards the transfer end to end (truncation, a file changed under the
daemon, a bug in either side), not against an adversary (whoever could forge the data could forge a digest sent
on the same stream). xxh3-128 does that job at memory speed (~10+ GB/s); sha256 ran at ~2 GB/s and was the
largest single cost of a fetch on the client. `xxh128sum` (xxhash's CLI) prints the same hex digest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import xxhash

from dyno.pbwire import read_varint, varint

__all__ = [
    "CHECKSUM_ALGORITHM",
    "RawChunk",
    "new_digest",
    "checksum_of",
    "checksum_file",
    "encode_chunk",
    "decode_chunk",
]

CHECKSUM_ALGORITHM = "xxh3_128"

# FileChunk's field numbers (protos/dyno/v1/dyno.proto), and the tags written for them: (number << 3) | wire type
_F_DATA, _F_OFFSET, _F_LAST, _F_TOTAL, _F_NAME, _F_CHECKSUM = 1, 2, 3, 5, 6, 7
_VARINT, _LEN = 0, 2


def _tag(field: int, wire: int) -> bytes:
    return bytes(((field << 3) | wire,))


def new_digest(data: bytes = b"") -> xxhash.xxh3_128:
    return xxhash.xxh3_128(data)


def checksum_of(digest: xxhash.xxh3_128) -> str:
    """The checksum string a stream carries: "<algorithm>:<hex digest>"."""
    return f"{CHECKSUM_ALGORITHM}:{digest.hexdigest()}"


_HASH_BLOCK = 1 << 20


def checksum_file(path: str | os.PathLike[str]) -> str:
    """The checksum a FetchTraceFile stream carries for this file (`xxh128sum` prints the same hex)."""
    digest = new_digest()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            digest.update(block)
    return checksum_of(digest)


def encode_chunk(
    data: bytes, offset: int, last: bool, *, checksum: str = "", total_size: int = 0, filename: str = ""
) -> bytes:
    """One FileChunk on the wire (proto3: default values are not written); the data is copied once."""
    head = b""
    for field, number in ((_F_OFFSET, offset), (_F_LAST, int(last)), (_F_TOTAL, total_size)):
        if number:
            head += _tag(field, _VARINT) + varint(number)
    for field, text in ((_F_NAME, filename), (_F_CHECKSUM, checksum)):
        if text:
            raw = text.encode()
            head += _tag(field, _LEN) + varint(len(raw)) + raw
    if not data:
        return head
    return b"".join((_tag(_F_DATA, _LEN), varint(len(data)), data, head))


@dataclass(frozen=True)
class RawChunk:
    data: memoryview  # a view into the received message: no copy
    offset: int = 0
    last: bool = False
    checksum: str = ""
    total_size: int = 0
    filename: str = ""


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    try:
        return read_varint(buf, i)
    except ValueError as e:
        raise ValueError(f"malformed FileChunk: {e}") from None


def decode_chunk(buf: bytes) -> RawChunk:
    """Parse one FileChunk message; unknown fields are skipped (a newer daemon may add some). ValueError when
    the bytes are not a well-formed message."""
    view = memoryview(buf)
    data = view[:0]
    offset = total = 0
    last = False
    checksum = filename = ""
    i, end = 0, len(buf)
    while i < end:
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _read_varint(buf, i)
            if field == _F_OFFSET:
                offset = value
            elif field == _F_LAST:
                last = bool(value)
            elif field == _F_TOTAL:
                total = value
        elif wire == _LEN:
            size, i = _read_varint(buf, i)
            if i + size > end:
                raise ValueError("malformed FileChunk: field runs past the end")
            if field == _F_DATA:
                data = view[i : i + size]
            elif field == _F_NAME:
                filename = bytes(view[i : i + size]).decode(errors="replace")
            elif field == _F_CHECKSUM:
                checksum = bytes(view[i : i + size]).decode(errors="replace")
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"malformed FileChunk: wire type {wire}")
        if i > end:
            raise ValueError("malformed FileChunk: truncated")
    return RawChunk(data=data, offset=offset, last=last, checksum=checksum, total_size=total, filename=filename)
