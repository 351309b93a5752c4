"""Loader edge cases found by the exploratory review: odd values are read or reported, never a traceback; one
file's failure never stops the other ranks; pipes and repeated paths work."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dyno.trace_analysis import loader
from dyno.trace_analysis.loader import TraceLoadError, load_trace, load_traces

pytestmark = pytest.mark.unit


def _x(**kw: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5, **kw}


def _write(path: Path, events: list[Any], **top: Any) -> Path:
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


def test_non_string_phase_is_skipped(tmp_path: Path, parser: str) -> None:
    t = load_trace(_write(tmp_path / "t.json", [{"ph": [], "name": "a", "pid": 1, "tid": 1, "ts": 0}, _x()]))
    assert len(t.events) == 1


def test_pid_beyond_int64_is_kept_as_a_label(tmp_path: Path, parser: str) -> None:
    t = load_trace(_write(tmp_path / "t.json", [_x(pid=2**63), _x(pid=7, ts=20)]))
    assert len(t.events) == 2
    assert len(set(t.events.pid.tolist())) == 2  # two different processes, neither truncated into the other


def test_out_of_range_integer_args_are_absent_without_warnings(tmp_path: Path, parser: str) -> None:
    ev = [_x(args={"correlation": 1e20, "stream": -1e30, "device": 70000}), _x(ts=20, args={"correlation": 5})]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in cast" would fail here
        t = load_trace(_write(tmp_path / "t.json", ev))
    assert t.events.correlation.tolist() == [-1, 5]
    assert t.events.stream.tolist() == [-1, -1]
    assert t.events.device.tolist() == [-1, -1]  # int16 column


def test_negative_duration_counts_as_zero(tmp_path: Path, parser: str) -> None:
    t = load_trace(_write(tmp_path / "t.json", [_x(dur=-10), _x(ts=20, dur=3)]))
    assert t.events.dur.tolist() == [0.0, 3.0]


def test_trace_events_that_is_not_an_array_says_so(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": 5}')
    with pytest.raises(TraceLoadError, match="traceEvents is a number, not an array"):
        load_trace(p)


def test_an_unexpected_failure_in_one_file_is_reported_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _write(tmp_path / "rank0.json", [_x()], distributedInfo={"rank": 0})
    bad = _write(tmp_path / "rank1.json", [_x()], distributedInfo={"rank": 1})
    real = loader.load_trace

    def flaky(path: Any, **kw: Any) -> Any:
        if Path(path) == bad:
            raise TypeError("a bug in the loader")
        return real(path, **kw)

    monkeypatch.setattr(loader, "load_trace", flaky)
    multi = load_traces([good, bad])
    assert list(multi.traces) == [0]
    assert [(e.path, e.reason) for e in multi.errors] == [
        (str(bad), "could not be loaded (TypeError: a bug in the loader); please report it with the file")
    ]


def test_the_same_file_given_twice_is_loaded_once(tmp_path: Path) -> None:
    f = _write(tmp_path / "rank0.json", [_x()])
    multi = load_traces([tmp_path, f, tmp_path / "." / "rank0.json"])
    assert list(multi.traces) == [0] and multi.errors == ()


@contextmanager
def _pipe(tmp_path: Path, data: bytes) -> Iterator[Path]:
    """A named pipe that a writer process fills, as `dyno-cli analyze <(zcat t.json.gz)` gives."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'wb').write({data!r})"])
    try:
        yield fifo
    finally:
        try:
            writer.wait(timeout=30)
        except subprocess.TimeoutExpired:  # the reader never opened the pipe
            writer.kill()
            writer.wait()


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_pipe_is_read_like_a_file(tmp_path: Path, compress: bool) -> None:
    data = json.dumps({"traceEvents": [_x(), _x(ts=20)]}).encode()
    with _pipe(tmp_path, gzip.compress(data) if compress else data) as fifo:
        t = load_trace(fifo)
    assert len(t.events) == 2


def test_an_empty_pipe_is_an_empty_input(tmp_path: Path) -> None:
    with _pipe(tmp_path, b"") as fifo, pytest.raises(TraceLoadError, match="empty input"):
        load_trace(fifo)


def test_files_that_name_no_rank_take_the_free_ranks(tmp_path: Path) -> None:
    # processes traced without torch.distributed: no distributedInfo, no rank in the file name
    for name in ("a.json", "b.json", "c.json"):
        _write(tmp_path / name, [_x()])
    _write(tmp_path / "d.json", [_x()], distributedInfo={"rank": 1})
    multi = load_traces(tmp_path)
    assert multi.errors == ()
    got = {r: (Path(t.meta.path).name, t.meta.rank_source) for r, t in multi.traces.items()}
    assert got == {
        0: ("a.json", "default"),
        1: ("d.json", "distributedInfo"),
        2: ("b.json", "order"),
        3: ("c.json", "order"),
    }
