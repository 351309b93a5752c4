"""Fast protobuf encoding of history samples.

Building a `dyno.v1.Sample` message field by field costs ~3 µs per metric in Python (labels are a map), which
made GetMetrics over a minute of history (~16k values) take ~60 ms. A series' name and labels never change,
so their encoded bytes are cached once per series and each value is appended as 9 bytes; the result is parsed
by the C protobuf runtime (`FromString`), which is ~10x faster than building the message in Python.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dyno.daemon.history import Sample, SeriesTable, StoredSample
from dyno.daemon.samplers.base import Labels
from dyno.pbwire import len_field, varint
from dyno.v1 import dyno_pb2

__all__ = [
    "encode_sample",
    "samples_response",
    "sample_message",
    "sample_messages",
    "StoredEncoder",
    "Page",
    "ResponseTooLarge",
]

_DOUBLE = struct.Struct("<d").pack
_MAX_CACHED_SERIES = 100_000


_prefix_cache: dict[tuple[str, Labels], bytes] = {}


def _prefix_bytes(name: str, labels: Labels) -> bytes:
    parts = [len_field(0x0A, name.encode())]  # Metric.name = 1
    for k, v in labels:  # Metric.labels = 2, map entry {key = 1, value = 2}
        parts.append(len_field(0x12, len_field(0x0A, k.encode()) + len_field(0x12, v.encode())))
    return b"".join(parts) + b"\x19"  # Metric.value = 3 (double) tag; the 8 bytes follow


def _series_prefix(name: str, labels: Labels) -> bytes:
    key = (name, labels)
    prefix = _prefix_cache.get(key)
    if prefix is None:
        prefix = _prefix_bytes(name, labels)
        if len(_prefix_cache) >= _MAX_CACHED_SERIES:
            _prefix_cache.clear()  # bounded: series churn (e.g. devices coming and going) cannot grow it forever
        _prefix_cache[key] = prefix
    return prefix


def _timestamp_field(timestamp_ms: int) -> bytes:
    """Sample.timestamp_ms (field 1, varint), or nothing for 0 (proto3 leaves a default out)."""
    return b"\x08" + varint(timestamp_ms) if timestamp_ms else b""


def encode_sample(sample: Sample, keep: Callable[[str], bool] | None = None) -> bytes:
    """Wire bytes of a dyno.v1.Sample; `keep(name)` filters metrics."""
    parts = [_timestamp_field(sample.timestamp_ms)]
    for r in sample.readings:
        if keep is not None and not keep(r.name):
            continue
        parts.append(len_field(0x12, _series_prefix(r.name, r.labels) + _DOUBLE(r.value)))
    return b"".join(parts)


def sample_message(sample: Sample, keep: Callable[[str], bool] | None = None) -> dyno_pb2.Sample:
    return dyno_pb2.Sample.FromString(encode_sample(sample, keep))


def _split(timestamp_ms: int, metrics: Sequence[bytes], max_bytes: int) -> tuple[bytes, int]:
    """The encoded Sample of `timestamp_ms` with the first of `metrics` (encoded Metric fields) that keep it within
    `max_bytes`, at least one of them when there are any (a single value always goes somewhere); and how many."""
    head = _timestamp_field(timestamp_ms)
    size, n = len(head), 0
    for m in metrics:
        if n and size + len(m) > max_bytes:
            break
        size += len(m)
        n += 1
    return head + b"".join(metrics[:n]), n


def sample_messages(
    sample: Sample, keep: Callable[[str], bool] | None = None, max_bytes: int | None = None
) -> list[dyno_pb2.Sample]:
    """`sample` as one dyno.v1.Sample, or as several with its timestamp when it encodes to more than `max_bytes`."""
    body = encode_sample(sample, keep)
    if max_bytes is None or len(body) <= max_bytes:
        return [dyno_pb2.Sample.FromString(body)]
    metrics = [
        len_field(0x12, _series_prefix(r.name, r.labels) + _DOUBLE(r.value))
        for r in sample.readings
        if keep is None or keep(r.name)
    ]
    out = []
    while metrics:
        part, n = _split(sample.timestamp_ms, metrics, max_bytes)
        out.append(dyno_pb2.Sample.FromString(part))
        metrics = metrics[n:]
    return out


def samples_response(samples: Iterable[Sample], hostname: str) -> dyno_pb2.GetMetricsResponse:
    body = b"".join(len_field(0x0A, encode_sample(s)) for s in samples) + len_field(0x12, hostname.encode())
    return dyno_pb2.GetMetricsResponse.FromString(body)


class ResponseTooLarge(Exception):
    """The samples asked for encode to more than the byte budget; `fit` of the newest ones would not."""

    def __init__(self, fit: int, asked: int) -> None:
        super().__init__(f"{asked} samples asked for, the newest {fit} fit")
        self.fit, self.asked = fit, asked


# room kept in a page for its next_page_token field (a token is ~70 characters)
_TOKEN_ROOM = 256


@dataclass(frozen=True)
class Page:
    """One encoded GetMetricsResponse page: `body` (samples and hostname), and where the range goes on: at
    `next_index` of the samples given to StoredEncoder.page, after `next_skip` of its values (None: the range is
    done)."""

    body: bytes
    next_index: int | None
    next_skip: int

    def with_token(self, token: str) -> bytes:
        return self.body + (len_field(0x1A, token.encode()) if token else b"")  # next_page_token = 3


class StoredEncoder:
    """Encodes the history's stored samples, with one cached prefix per series id of its SeriesTable (those of
    series the table has forgotten are dropped from the cache as it grows)."""

    def __init__(self, series: SeriesTable) -> None:
        self._series = series
        self._prefixes: dict[int, bytes] = {}
        self._lock = threading.Lock()  # RPC threads extend the prefix cache concurrently

    def _prefix(self, i: int) -> bytes | None:
        prefix = self._prefixes.get(i)
        if prefix is not None:
            return prefix
        key = self._series.key(i)
        if key is None:  # forgotten: a sample held far longer than any call takes
            return None
        prefix = _prefix_bytes(*key)
        with self._lock:
            if len(self._prefixes) >= 2 * len(self._series) + 256:
                self._prefixes = {j: p for j, p in self._prefixes.items() if self._series.key(j) is not None}
            self._prefixes[i] = prefix
        return prefix

    def encode(self, s: StoredSample, keep: set[int] | None = None) -> bytes:
        return _timestamp_field(s.timestamp_ms) + b"".join(self._metrics(s, keep))

    def _metrics(self, s: StoredSample, keep: set[int] | None) -> list[bytes]:
        """The encoded Metric fields (Sample.metrics) of `s`'s values that `keep` selects."""
        parts = []
        prefixes = self._prefixes
        for i, v in zip(s.ids, s.values, strict=True):
            if keep is None or i in keep:
                prefix = prefixes.get(i) or self._prefix(i)
                if prefix is not None:
                    parts.append(len_field(0x12, prefix + _DOUBLE(v)))
        return parts

    def page(
        self, stored: Sequence[StoredSample], hostname: str, keep: set[int] | None, max_bytes: int, skip: int = 0
    ) -> Page:
        """The encoded GetMetricsResponse of the oldest of `stored` that fit in `max_bytes` (the first one after
        `skip` of its values), without its next_page_token (appended by the caller: `Page.with_token`)."""
        tail = len_field(0x12, hostname.encode())
        budget = max_bytes - len(tail) - _TOKEN_ROOM
        parts: list[bytes] = []
        size = 0
        for index, s in enumerate(stored):
            first = skip if index == 0 else 0
            metrics = self._metrics(s, keep)[first:]
            body = _timestamp_field(s.timestamp_ms) + b"".join(metrics)
            part = len_field(0x0A, body)
            if size + len(part) <= budget:
                parts.append(part)
                size += len(part)
                continue
            if parts:  # the next page starts with this sample
                return Page(b"".join(parts) + tail, index, 0)
            # alone too big for a page: as many of its values as fit now, the rest on the next pages
            body, n = _split(s.timestamp_ms, metrics, budget - 8)  # 8: its own field tag and length
            return Page(len_field(0x0A, body) + tail, index, first + n)
        return Page(b"".join(parts) + tail, None, 0)

    def response_bytes(
        self,
        stored: Sequence[StoredSample],
        hostname: str,
        keep: set[int] | None = None,
        max_bytes: int | None = None,
    ) -> bytes:
        """The encoded GetMetricsResponse for `stored` (oldest first). Encoded newest first, so that beyond
        `max_bytes` it stops at once (memory bounded by the budget) and raises ResponseTooLarge saying how many of
        the newest fit. Sent as it is, these bytes cost a sixth of the memory of a parsed message."""
        parts: list[bytes] = []
        size = 0
        for s in reversed(stored):
            part = len_field(0x0A, self.encode(s, keep))
            size += len(part)
            if max_bytes is not None and size > max_bytes:
                raise ResponseTooLarge(len(parts), len(stored))
            parts.append(part)
        parts.reverse()
        parts.append(len_field(0x12, hostname.encode()))
        return b"".join(parts)
