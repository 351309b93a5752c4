"""FetchTraceFile's chunks (daemon/tracing/streaming.py): they cover the file, the last carries its checksum (cached
while the file is unchanged), and only a file that can be the trace is ever streamed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dyno import trace_layout
from dyno.daemon.tracing import streaming, trust
from dyno.filechunks import checksum_of, new_digest

pytestmark = pytest.mark.unit


def test_chunks_cover_file_with_checksum_on_last(tmp_path: Path) -> None:
    data = os.urandom(2 * 1024 * 1024 + 17)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    chunks = list(streaming.iter_chunks(path, 1024 * 1024))
    assert [len(c.data) for c in chunks] == [1024 * 1024, 1024 * 1024, 17]
    assert b"".join(c.data for c in chunks) == data
    assert [c.last for c in chunks] == [False, False, True]
    assert chunks[-1].checksum == checksum_of(new_digest(data)) and not chunks[0].checksum
    assert chunks[0].total_size == len(data) and chunks[0].filename == "f.bin"
    assert [c.offset for c in chunks] == [0, 1024 * 1024, 2 * 1024 * 1024]
    assert max(len(c.data) for c in streaming.iter_chunks(path, 10 * 1024 * 1024)) == streaming.MAX_CHUNK
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    (only,) = streaming.iter_chunks(empty)
    assert only.last and only.data == b"" and only.checksum == checksum_of(new_digest(b""))


def test_checksum_cache_skips_rehash_and_misses_on_change(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    path.write_bytes(b"a" * 3000)
    cache = streaming.ChecksumCache()
    first = list(streaming.iter_chunks(path, 1024, cache))
    assert cache.get(path.stat()) == first[-1].checksum == checksum_of(new_digest(b"a" * 3000))
    assert list(streaming.iter_chunks(path, 1024, cache))[-1].checksum == first[-1].checksum
    path.write_bytes(b"b" * 3000)
    os.utime(path, ns=(1, 1))
    assert list(streaming.iter_chunks(path, 1024, cache))[-1].checksum == checksum_of(new_digest(b"b" * 3000))


def test_planted_symlinks_and_hard_links_are_never_served(tmp_path: Path) -> None:
    """The per-trace dir is world-writable: a local user must not make the daemon stream another file."""
    secret = tmp_path / "secret"
    secret.write_text("not a trace")
    d = trust.make_trace_dir(tmp_path / "traces", "t1")
    link = trace_layout.agent_output(tmp_path / "traces", "t1", "h", 42)
    os.symlink(secret, link)
    assert trust.find_trace_file(tmp_path / "traces", "t1", "h", 42) is None
    with pytest.raises(OSError):
        list(streaming.iter_chunks(link))
    hard = trace_layout.agent_output(tmp_path / "traces", "t1", "h", 43)
    os.link(secret, hard)
    with pytest.raises(OSError, match="hard link"):
        list(streaming.iter_chunks(hard))
    real = trace_layout.agent_output(tmp_path / "traces", "t1", "h", 44)
    real.write_bytes(b"x" * 10)
    assert trust.find_trace_file(tmp_path / "traces", "t1", "h", 44) == real
    assert b"".join(c.data for c in streaming.iter_chunks(real)) == b"x" * 10
    assert d.is_dir()
