"""trace_analysis read-ahead (``readahead``): the batches and errors of the direct iteration, in the same order;
the bound hands the iterator over to the consumer; anything unexpected falls back to loading the file directly."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dyno.trace_analysis import cli, readahead
from dyno.trace_analysis.cli import _start_read_ahead, add_analyze_arguments, run_analyze
from dyno.trace_analysis.eventbatches import Batch, EventBatches
from dyno.trace_analysis.jsonscan import BLOCK_SIZE, ScanError
from dyno.trace_analysis.model import Trace
from dyno.trace_analysis.readahead import ReadAhead
from dyno.trace_analysis.traceload import load_trace
from dyno.trace_analysis.traceopen import TraceLoadError

pytestmark = pytest.mark.unit


class FakeBatches(EventBatches):
    """``n`` batches of ``size`` bytes, then ScanError after them when ``fail``; records the thread of each step."""

    def __init__(self, n: int, size: int = 10, fail: bool = False) -> None:  # (opens no file)
        self.n, self.size, self.fail = n, size, fail
        self.threads: list[str] = []
        self.closed = 0

    def batches(self) -> Iterator[Batch]:
        for i in range(self.n):
            self.threads.append(threading.current_thread().name)
            yield Batch([i], 1, b"x" * self.size, i == self.n - 1)
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise ScanError(f"invalid JSON after {self.n} batches")

    def close(self) -> None:
        self.closed += 1


def _drain(batches: Iterator[Batch]) -> tuple[list[Batch], BaseException | None]:
    got: list[Batch] = []
    try:
        for b in batches:
            got.append(b)
    except Exception as e:  # noqa: BLE001 (compared below)
        return got, e
    return got, None


def _run_ahead(source: FakeBatches, bound: int) -> ReadAhead:
    ahead = ReadAhead(Path("fake.json"), bound=bound, open_source=lambda: source)
    ahead.start_thread()
    ahead._thread.join(5)  # (the fake never blocks: the thread is done, or handed over at the bound)
    assert not ahead._thread.is_alive()
    assert ahead.take()
    return ahead


@pytest.mark.parametrize("fail", [False, True])
@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("bound", [0, 25, 1 << 20])
def test_same_batches_and_error_as_the_direct_iteration(n: int, fail: bool, bound: int) -> None:
    direct = _drain(FakeBatches(n, fail=fail).batches())
    source = FakeBatches(n, fail=fail)
    ahead = _run_ahead(source, bound)
    got = _drain(ahead.batches())
    assert got[0] == direct[0]
    assert type(got[1]) is type(direct[1]) and str(got[1]) == str(direct[1])
    ahead.close()
    assert source.closed == 1


def test_the_bound_hands_the_iterator_over_to_the_consumer() -> None:
    source = FakeBatches(6, size=10)
    ahead = _run_ahead(source, bound=25)  # stops once 30 bytes are held: after 3 batches
    assert len(ahead._items) == 3 and ahead._state is readahead._State.HANDED_OVER
    got, error = _drain(ahead.batches())
    assert [b.items for b in got] == [[i] for i in range(6)] and error is None
    me = threading.current_thread().name
    assert source.threads[:3] == ["dyno-readahead"] * 3 and source.threads[3:] == [me] * 4


def test_a_consumer_waits_for_the_thread_and_takes_batches_as_they_come() -> None:
    gate = threading.Event()

    class Slow(FakeBatches):
        def batches(self) -> Iterator[Batch]:
            yield Batch([0], 1, b"x", False)
            gate.wait(5)
            yield Batch([1], 1, b"y", True)

    source = Slow(2)
    ahead = ReadAhead(Path("fake.json"), open_source=lambda: source)
    ahead.start_thread()
    it = ahead.batches()
    while ahead._state is readahead._State.PENDING:
        threading.Event().wait(0.001)
    assert ahead.take()
    assert next(it).items == [0]
    threading.Timer(0.05, gate.set).start()
    assert next(it).items == [1]  # (waited on the thread)
    assert next(it, None) is None
    ahead.close()


def test_a_file_not_open_yet_falls_back_and_the_thread_closes_it() -> None:
    opened = threading.Event()
    go = threading.Event()
    source = FakeBatches(2)

    def slow_open() -> EventBatches:
        opened.set()
        go.wait(5)
        return source

    ahead = ReadAhead(Path("fake.json"), open_source=slow_open)
    ahead.start_thread()
    opened.wait(5)
    assert not ahead.take()  # still opening: the caller loads the file itself
    go.set()
    ahead._thread.join(5)
    assert source.closed == 1 and ahead._state is readahead._State.UNAVAILABLE and not source.threads


def test_a_failed_open_falls_back() -> None:
    def broken() -> EventBatches:
        raise OSError("no such file")

    ahead = ReadAhead(Path("fake.json"), open_source=broken)
    ahead.start_thread()
    ahead._thread.join(5)
    assert not ahead.take()


def _trace(events: int = 3000) -> bytes:
    evs = [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": i, "dur": 1} for i in range(events)
    ]
    return json.dumps({"traceEvents": evs, "distributedInfo": {"rank": 0}}).encode()


def _assert_same(a: Trace, b: Trace) -> None:
    for col in a.events.COLUMNS:
        assert np.array_equal(getattr(a.events, col), getattr(b.events, col), equal_nan=True), col
    assert list(a.strings) == list(b.strings) and repr(a.meta) == repr(b.meta)


def _claimed(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    got: list[bool] = []
    real = readahead.claim

    def spy(path: Path, block_size: int) -> ReadAhead | None:
        r = real(path, block_size)
        got.append(r is not None)
        return r

    monkeypatch.setattr(readahead, "claim", spy)
    return got


def _load_ahead(path: Path) -> object:
    ahead = readahead.start(path)
    assert ahead is not None
    ahead._thread.join(5)  # (the whole file read ahead: the consumer meets its end or its error in the buffer)
    try:
        return load_trace(path)
    except TraceLoadError as e:
        return e.reason


def _load(path: Path) -> object:
    try:
        return load_trace(path)
    except TraceLoadError as e:
        return e.reason


def _damaged(tmp_path: Path) -> dict[str, Path]:
    data = _trace()
    gz = gzip.compress(data)
    files = {
        "truncated gzip": gz[: len(gz) * 2 // 3],
        "bad crc": gz[:-8] + ((zlib.crc32(data) + 1) & 0xFFFFFFFF).to_bytes(4, "little") + gz[-4:],
        "garbage": data[: len(data) // 2] + b"\x00garbage!!!\x00" + data[len(data) // 2 :],
        "truncated json": data[: len(data) - 100],
    }
    out = {}
    for name, content in files.items():
        p = tmp_path / (name.replace(" ", "_") + (".json.gz" if "gzip" in name or "crc" in name else ".json"))
        p.write_bytes(content)
        out[name] = p
    return out


def test_load_trace_with_the_read_ahead_gives_the_same_trace_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "rank0.json.gz"
    good.write_bytes(gzip.compress(_trace(20000)))
    claimed = _claimed(monkeypatch)
    direct, ahead = _load(good), _load_ahead(good)
    assert claimed == [False, True]
    assert isinstance(direct, Trace) and isinstance(ahead, Trace) and len(ahead.events) == 20000
    _assert_same(ahead, direct)
    for name, p in _damaged(tmp_path).items():
        claimed.clear()
        direct, ahead = _load(p), _load_ahead(p)
        assert isinstance(direct, str) and ahead == direct, name
        assert claimed == [False, True], name


def test_a_small_block_size_hands_over_at_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(_trace(20000))
    claimed = _claimed(monkeypatch)
    ahead = ReadAhead(p, 1 << 16, bound=1)  # (the thread stops after one batch)
    with readahead._lock:
        readahead._pending = ahead
    ahead.start_thread()
    ahead._thread.join(5)
    assert ahead._state is readahead._State.HANDED_OVER
    got = load_trace(p, block_size=1 << 16)
    assert claimed == [True]
    _assert_same(got, load_trace(p, block_size=1 << 16))


def test_empty_file_and_pipe_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    claimed = _claimed(monkeypatch)
    assert _load_ahead(empty) == _load(empty) == "empty file"
    assert claimed == []  # (trace_size refuses it first; the CLI discards the read-ahead no load claimed)
    leftover = readahead._pending
    assert leftover is not None and not leftover.take()
    readahead.discard(leftover)
    assert readahead._pending is None
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    ahead = readahead.start(fifo)
    ahead._thread.join(5)  # (never opened: a pipe cannot be read twice)
    assert not ahead._thread.is_alive() and readahead.claim(fifo, BLOCK_SIZE) is None


def test_claim_is_for_its_file_and_once(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(_trace())
    ahead = readahead.start(p)
    ahead._thread.join(5)
    assert readahead.claim(tmp_path / "other.json", BLOCK_SIZE) is None
    assert readahead.claim(p, BLOCK_SIZE // 2) is None
    assert readahead.claim(p, BLOCK_SIZE) is ahead
    assert readahead.claim(p, BLOCK_SIZE) is None
    ahead.close()


def _args(*paths: str, jobs: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(paths=list(paths), list_rules=False, jobs=jobs)


def test_the_cli_reads_ahead_one_trace_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = tmp_path / "one"
    one.mkdir()
    (one / "rank0.json").write_bytes(_trace())
    two = tmp_path / "two"
    two.mkdir()
    for name in ("rank0.json", "rank1.json"):
        (two / name).write_bytes(_trace())
    mixed = tmp_path / "mixed"  # two dyno traces: the load refuses the folder
    for tid in ("a", "b"):
        (mixed / tid).mkdir(parents=True)
        (mixed / tid / "manifest.json").write_text("{}")
        (mixed / tid / "rank0.json").write_bytes(_trace())
    started: list[Path] = []
    monkeypatch.setattr(readahead, "start", lambda path: started.append(path))
    assert _start_read_ahead(_args(str(one))) is None and started == [one / "rank0.json"]
    started.clear()
    for args in (
        _args(str(two)),
        _args(str(one / "rank0.json"), str(two / "rank0.json")),
        _args(str(mixed)),
        _args(str(one), str(tmp_path / "empty")),
        _args(str(one), jobs=2),
        _args(),
    ):
        assert _start_read_ahead(args) is None
    (tmp_path / "empty").mkdir()
    assert _start_read_ahead(_args(str(one), str(tmp_path / "empty"))) is None
    list_rules = _args(str(one))
    list_rules.list_rules = True
    assert _start_read_ahead(list_rules) is None
    monkeypatch.setenv("DYNO_NATIVE_PARSE", "0")
    assert _start_read_ahead(_args(str(one))) is None
    assert started == []


def _cli(*argv: str) -> tuple[int, str, str]:
    parser = add_analyze_arguments(argparse.ArgumentParser())
    out, err = io.StringIO(), io.StringIO()
    rc = run_analyze(parser.parse_args(list(argv)), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def test_run_analyze_reads_ahead_and_reports_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "rank0.json.gz"
    good.write_bytes(gzip.compress(_trace(20000)))
    bad = _damaged(tmp_path)["bad crc"]
    real_start = readahead.start

    def start_and_open(path: Path) -> ReadAhead:  # (in-process the imports are done: the load would come first)
        ahead = real_start(path)
        while ahead._state is readahead._State.PENDING:
            threading.Event().wait(0.001)
        return ahead

    monkeypatch.setattr(readahead, "start", start_and_open)
    claimed = _claimed(monkeypatch)
    with_ahead = [_cli(str(good), "--json"), _cli(str(bad), "--json"), _cli(str(bad), "--threshold", "x")]
    assert claimed == [True, True] and readahead._pending is None  # (the bad threshold: discarded, not claimed)
    monkeypatch.setattr(cli, "_start_read_ahead", lambda args: None)
    assert [_cli(str(good), "--json"), _cli(str(bad), "--json"), _cli(str(bad), "--threshold", "x")] == with_ahead
    assert claimed == [True, True, False, False] and with_ahead[1][0] == 1 and "checksum" in with_ahead[1][2]


def test_an_element_the_builder_refuses_names_the_gzip_damage_the_thread_read_past(tmp_path: Path) -> None:
    """The builder's own ScanError (bad UTF-8 in a key the decoders skip) while the thread has read the stream to
    its damaged end: the gzip error stands, as when the load reads the rest of the stream itself."""
    data = _trace(60000)  # several blocks
    bad = b'{"ph": "i", "name": "x", "pid": 0, "tid": 7, "ts": 5, "s": "t", "junk": "\xff"}, '
    at = data.index(b"[") + 1
    data = data[:at] + bad + data[at:]
    gz = gzip.compress(data)
    p = tmp_path / "rank0.json.gz"
    p.write_bytes(gz[:-8] + ((zlib.crc32(data) + 1) & 0xFFFFFFFF).to_bytes(4, "little") + gz[-4:])
    direct, ahead = _load(p), _load_ahead(p)
    assert isinstance(direct, str) and direct.startswith("corrupt gzip stream: the checksum"), direct
    assert ahead == direct


def test_no_thread_to_start_means_no_read_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(_trace(10))

    def refuse(self: ReadAhead) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(ReadAhead, "start_thread", refuse)
    assert readahead.start(p) is None
    assert readahead._pending is None  # discarded, not left for a claim
    assert readahead.claim(p, BLOCK_SIZE) is None  # nothing pending: the load reads the file itself
    assert len(load_trace(p).events) == 10
