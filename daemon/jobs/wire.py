"""ListJobs' answer joined from the stored encodings (dyno.daemon.jobs.store keeps each record as its encoded
JobRecord) instead of parsing each into a message, copying the messages into a response and serializing it again.

Byte for byte what protobuf writes for the same message: a message is written in field-number order and record_id
(24) is JobRecord's last field, so a stored encoding (written with record_id 0, i.e. without that field) followed
by record_id's field is the record's encoding. A stored encoding that disagrees with its row's columns, which
override it (a record closed by JobStore.running still says running in its encoding: the store finds those), is
parsed and encoded again by the store instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from dyno.pbwire import len_field, varint

__all__ = ["LATEST_ANALYSIS_FIELD", "RECORD_ID_FIELD", "list_jobs_response", "stored_record", "with_latest_analysis"]

# JobRecord.record_id: the last field of the stored encoding, and latest_analysis, which ListJobs appends after it
# from the analyses' table (tests/unit/daemon/jobs/test_wire.py checks that no other field follows them)
RECORD_ID_FIELD = 24
LATEST_ANALYSIS_FIELD = 25
_RECORD_ID_TAG = varint(RECORD_ID_FIELD << 3)  # varint wire type
_LATEST_ANALYSIS_TAG = varint(LATEST_ANALYSIS_FIELD << 3 | 2)  # length-delimited
_SMALL = [bytes((i,)) for i in range(0x80)]


def stored_record(data: bytes, record_id: int) -> bytes:
    """The encoded JobRecord of a stored row whose encoding agrees with its columns (its `data` and id)."""
    return data + _RECORD_ID_TAG + _varint(record_id) if record_id else data


def with_latest_analysis(record: bytes, summary: bytes) -> bytes:
    """An encoded JobRecord (with or without record_id) followed by its latest_analysis field: the encoded
    dyno.v1.TraceSummary `summary`."""
    return record + _LATEST_ANALYSIS_TAG + _varint(len(summary)) + summary


def _varint(n: int) -> bytes:
    """varint() for a non-negative n, without its loop for the values a page meets (ids, lengths): ~0.2 µs, a
    fifth of a page of 1000 records' cost otherwise."""
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
    return varint(n)


def list_jobs_response(hostname: str, records: Iterable[bytes], next_page_token: str, store_problem: str) -> bytes:
    """An encoded ListJobsResponse (hostname = 1, jobs = 2, next_page_token = 3, store_problem = 4)."""
    parts = [len_field(0x0A, hostname.encode())] if hostname else []
    parts += [b"\x12" + _varint(len(r)) + r for r in records]
    if next_page_token:
        parts.append(len_field(0x1A, next_page_token.encode()))
    if store_problem:
        parts.append(len_field(0x22, store_problem.encode()))
    return b"".join(parts)
