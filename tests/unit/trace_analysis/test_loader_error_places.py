"""trace_analysis loader errors name the real cause and its place in the file: damaged gzip data is reported by
its checksum, not as the invalid JSON it inflates to; bytes that are not JSON in the middle of a file are reported
at their byte offset, not as a file cut at its full length; files of different processes that each say rank 0 are
not called profiling cycles of one rank. Both decoders, any block size."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from dyno.trace_analysis.loader import TraceLoadError, load_trace, load_traces

pytestmark = pytest.mark.unit


def _x(i: int, pid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": pid, "tid": 1, "ts": 10 * i, "dur": 5}


def _data(n: int = 3000, **top: Any) -> bytes:
    return json.dumps({"traceEvents": [_x(i) for i in range(n)], "displayTimeUnit": "ms", **top}).encode()


def _reason(path: Path, block: int = 1 << 20) -> str:
    with pytest.raises(TraceLoadError) as err:
        load_trace(path, block_size=block)
    return err.value.reason


def test_damaged_gzip_data_is_named_by_its_checksum(tmp_path: Path, parser: str) -> None:
    data = _data()
    gz = bytearray(gzip.compress(data, compresslevel=0))  # stored blocks: a changed byte still inflates
    at = gz.index(b'"aten::op3"', len(gz) // 2)
    gz[at] = ord("#")  # the JSON it inflates to is invalid there
    path = tmp_path / "t.json.gz"
    path.write_bytes(bytes(gz))
    reason = _reason(path)
    assert reason.startswith("corrupt gzip stream: the checksum of its data does not match (")
    assert "the compressed bytes are damaged" in reason and "invalid JSON" not in reason


@pytest.mark.parametrize("block", [1 << 20, 4096, 333])
@pytest.mark.parametrize(
    ("garbage", "first_bad"),
    [
        (b'#$@!%&"{[~`^x', 7),  # inside a name string: its quote ends the string, the "{" after it is the error
        (b"#$@!%&{[~`^x", 0),  # between two events
        (b'"{[{[{[', 1),  # inside a string: a quote, then brackets that never close
        (b"xyz", 0),  # between two events, nothing the structural scan sees
    ],
)
def test_garbage_in_the_middle_is_found_at_its_byte(
    tmp_path: Path, parser: str, block: int, garbage: bytes, first_bad: int
) -> None:
    data = _data()
    if first_bad == 0:
        at = data.index(b"}, {", len(data) // 2) + 1  # right after an event's closing brace
    else:
        at = data.index(b"aten::op", len(data) // 2) + 4  # inside a name
    path = tmp_path / "t.json"
    path.write_bytes(data[:at] + garbage + data[at:])
    reason = _reason(path, block)
    assert reason.startswith("invalid JSON in traceEvents (at byte "), reason
    assert "truncated" not in reason and "(char " not in reason
    assert int(reason.split("at byte ")[1].split()[0]) == at + first_bad


def test_garbage_in_the_metadata_is_found_at_its_byte(tmp_path: Path, parser: str) -> None:
    data = _data(200, deviceProperties=[{"id": 0, "name": "GPU"}])
    at = data.index(b'"name": "GPU"') + 9
    path = tmp_path / "t.json"
    path.write_bytes(data[:at] + b'"{{' + data[at:])
    assert _reason(path, 4096).startswith(f"invalid JSON outside traceEvents at byte {at + 1}: ")


def test_a_file_cut_short_is_still_truncated(tmp_path: Path, parser: str) -> None:
    data = _data()
    cut = data.index(b'"ph"', len(data) // 2)
    path = tmp_path / "t.json"
    path.write_bytes(data[:cut])
    assert _reason(path, 4096).startswith(f"truncated: JSON ends inside an unfinished value after {cut} bytes")


def test_invalid_json_in_a_batch_is_placed_in_the_file(tmp_path: Path, parser: str) -> None:
    data = _data()
    at = data.index(b'"dur": 5', len(data) // 2) + 7
    path = tmp_path / "t.json"
    path.write_bytes(data[:at] + b"x" + data[at + 1 :])  # "dur": x
    reason = _reason(path)
    assert reason.startswith(f"invalid JSON in traceEvents (at byte {at} of the file): "), reason
    assert "(char " not in reason


def test_unrelated_traces_that_each_say_rank_0_are_not_cycles(tmp_path: Path) -> None:
    # three recordings at successive times by three processes, each the rank 0 of its own job
    for k, pid in enumerate((101, 202, 303)):
        events = [{**_x(i, pid), "ts": 1_000_000 * k + 10 * i} for i in range(50)]
        doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}}
        (tmp_path / f"job{k}.json").write_text(json.dumps(doc))
    multi = load_traces(tmp_path)
    assert list(multi.traces) == [0] and len(multi.errors) == 2
    for e in multi.errors:
        assert "profiling cycle" not in e.reason
        assert e.reason.startswith("duplicate rank 0 (rank 0 is ")
        assert "recorded by another process (pid " in e.reason and "a trace of another job?" in e.reason


def test_the_cycles_of_one_process_are_still_cycles(tmp_path: Path) -> None:
    for k in range(3):
        events = [{**_x(i, 4242), "ts": 1_000_000 * k + 10 * i} for i in range(50)]
        doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}}
        (tmp_path / f"w.{k}.pt.trace.json").write_text(json.dumps(doc))
    multi = load_traces(tmp_path)
    assert len(multi.errors) == 2 and all("an earlier profiling cycle of rank 0" in e.reason for e in multi.errors)
