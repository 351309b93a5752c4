"""GetMetrics' pages: which stored samples a request selects, and the page token that continues a range.

A stock gRPC client (grpcio, @grpc/grpc-js, grpc-go) refuses an answer over 4 MiB, and an hour of 1 s samples of
4 GPUs is ~5 MB: so an answer is at most request_limits.MAX_METRICS_PAGE_BYTES, the newest sample only unless a
range is asked for, and a range continues with the token of the answer before. The token names the range by
timestamps (the ring moves on between calls: positions would shift under the client) and the number of values
of its first sample already sent (a sample bigger than a page on its own is split over pages).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from dyno.daemon.history import StoredSample

__all__ = ["PageToken", "BadPageToken", "names_digest", "select", "first_page"]

_VERSION = "1"


class BadPageToken(ValueError):
    """A page_token this daemon did not write, or sent with other names than the request that got it."""


def names_digest(names: Sequence[str]) -> int:
    """A checksum of the name patterns, kept in the token: a page of other names would skip or repeat values."""
    return zlib.crc32("\0".join(names).encode())


@dataclass(frozen=True)
class PageToken:
    """Where a range continues: samples with from_ms <= timestamp_ms <= until_ms, the first of them after `skip`
    of its (name-filtered) values."""

    from_ms: int
    until_ms: int
    skip: int
    names: int  # names_digest of the request's patterns

    def encode(self) -> str:
        text = f"{_VERSION}.{self.from_ms}.{self.until_ms}.{self.skip}.{self.names}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @staticmethod
    def decode(token: str, names: Sequence[str]) -> PageToken:
        try:
            text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
            version, *fields = text.split(".")
            if version != _VERSION or len(fields) != 4:
                raise ValueError(text)
            from_ms, until_ms, skip, digest = (int(f) for f in fields)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise BadPageToken("page_token: not a next_page_token of this daemon") from None
        if min(from_ms, until_ms, skip, digest) < 0:
            raise BadPageToken("page_token: not a next_page_token of this daemon")
        if digest != names_digest(names):
            raise BadPageToken("page_token: names must be the same as in the request that got this token")
        return PageToken(from_ms, until_ms, skip, digest)


def first_page(since_ms: int, limit: int, whole_history: bool) -> tuple[int, int]:
    """(since_ms, limit) to select for a first request: the newest sample when no range is asked for."""
    if since_ms == 0 and limit == 0 and not whole_history:
        return 0, 1
    return since_ms, limit


def select(stored: Sequence[StoredSample], token: PageToken) -> list[StoredSample]:
    """The samples of a continued range still in the history (ones evicted meanwhile are gone)."""
    return [s for s in stored if token.from_ms <= s.timestamp_ms <= token.until_ms]
