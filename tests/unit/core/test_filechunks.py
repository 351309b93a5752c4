"""dyno.filechunks: the hand-written FileChunk codec must read and write exactly what the protobuf runtime does."""

from __future__ import annotations

import itertools
import os

import pytest
import xxhash

from dyno.filechunks import CHECKSUM_ALGORITHM, checksum_of, decode_chunk, encode_chunk, new_digest
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

_DATAS = [b"", b"x", os.urandom(127), os.urandom(128), os.urandom(1 << 20)]
_OFFSETS = [0, 1, 127, 128, 300 * 1024 * 1024, (1 << 63) - 1]
_FIELDS = list(
    itertools.product(
        _DATAS, _OFFSETS, [False, True], ["", "xxh3_128:" + "a" * 32], [0, 5, 1 << 40], ["", "h_1.pt.trace.json.gz"]
    )
)


@pytest.mark.parametrize("data,offset,last,checksum,total,name", _FIELDS[:: max(1, len(_FIELDS) // 120)])
def test_encoded_chunk_is_the_protobuf_message(
    data: bytes, offset: int, last: bool, checksum: str, total: int, name: str
) -> None:
    wire = encode_chunk(data, offset, last, checksum=checksum, total_size=total, filename=name)
    want = dyno_pb2.FileChunk(data=data, offset=offset, last=last, checksum=checksum, total_size=total, filename=name)
    assert dyno_pb2.FileChunk.FromString(wire) == want
    got = decode_chunk(want.SerializeToString())  # and the decoder reads the runtime's own encoding
    assert (bytes(got.data), got.offset, got.last, got.checksum, got.total_size, got.filename) == (
        data,
        offset,
        last,
        checksum,
        total,
        name,
    )


def test_decoder_skips_unknown_fields_and_the_data_is_a_view() -> None:
    known = dyno_pb2.FileChunk(data=b"abc", offset=9, last=True).SerializeToString()
    # fields a newer daemon might add: varint 20, fixed64 21, length-delimited 22, fixed32 23
    extra = b"\xa0\x01\x05" + b"\xa9\x01" + b"\x00" * 8 + b"\xb2\x01\x02hi" + b"\xbd\x01" + b"\x00" * 4
    msg = extra + known
    got = decode_chunk(msg)
    assert bytes(got.data) == b"abc" and got.offset == 9 and got.last
    assert isinstance(got.data, memoryview) and got.data.obj is msg


@pytest.mark.parametrize(
    "bad",
    [
        b"\x0a\x05abc",  # data shorter than its length
        b"\x10",  # varint cut off
        b"\x10" + b"\xff" * 11,  # overlong varint
        b"\x0b",  # wire type 3 (groups) is not used by FileChunk
        b"\xa9\x01\x00",  # fixed64 cut off
    ],
)
def test_malformed_messages_raise_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError, match="malformed FileChunk"):
        decode_chunk(bad)


def test_checksum_names_its_algorithm_and_matches_xxh3_128() -> None:
    data = os.urandom(3000)
    d = new_digest()
    d.update(data[:1000])
    d.update(memoryview(data)[1000:])
    assert checksum_of(d) == f"{CHECKSUM_ALGORITHM}:{xxhash.xxh3_128(data).hexdigest()}"
    assert checksum_of(new_digest(data)) == checksum_of(d)
    assert checksum_of(new_digest(b"")) != checksum_of(new_digest(b"\0"))
