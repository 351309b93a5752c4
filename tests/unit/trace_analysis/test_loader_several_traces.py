"""A folder holding several dyno traces (`dyno-cli trace`'s output dir, dynod's trace dir) is refused with the
traces named, instead of analysing unrelated runs as ranks 0, 1, ... of one job; one trace's folder still loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis import AnalysisError, analyze
from dyno.trace_analysis.loader import TraceLoadError, load_traces

from conftest import run_cli

pytestmark = pytest.mark.unit

T1, T2 = "20261201T050000-aaaaaaaa", "20261201T060000-bbbbbbbb"


def _trace(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 5, "pid": 1, "tid": 1}
    path.write_text(json.dumps({"traceEvents": [ev]}))


def _cli_output(root: Path, trace_id: str) -> None:
    """`dyno-cli trace` lays a trace out as <trace_id>/manifest.json and <trace_id>/<host>/<file>."""
    (root / trace_id).mkdir(parents=True)
    (root / trace_id / "manifest.json").write_text("{}")
    _trace(root / trace_id / "gpu1_1778" / "vm_10.pt.trace.json")
    _trace(root / trace_id / "gpu2_1778" / "vm_20.pt.trace.json")


def test_cli_output_dir_with_two_traces_is_refused_naming_them(tmp_path: Path) -> None:
    _cli_output(tmp_path, T1)
    _cli_output(tmp_path, T2)
    with pytest.raises(TraceLoadError) as e:
        load_traces(tmp_path)
    assert (
        e.value.reason
        == f"holds 2 traces ({T1}, {T2}), not the ranks of one: analyse one of them, e.g. {tmp_path / T2}"
    )
    with pytest.raises(AnalysisError, match="holds 2 traces"):
        analyze(tmp_path)
    r = run_cli("analyze", str(tmp_path))
    assert r.returncode == 1 and r.stderr.startswith(f"dyno-cli: error: no trace could be analysed ({tmp_path}: holds")


def test_one_trace_folder_loads_all_its_hosts(tmp_path: Path) -> None:
    _cli_output(tmp_path, T1)
    _cli_output(tmp_path, T2)
    m = load_traces(tmp_path / T1)
    assert m.ranks == [0, 1] and not m.errors


def test_daemon_trace_dir_with_two_traces_is_refused(tmp_path: Path) -> None:
    for tid in (T1, T2):  # dynod: <trace_dir>/<trace_id>/dynod-record.json beside the files
        _trace(tmp_path / tid / "gpu1_10.pt.trace.json")
        (tmp_path / tid / "dynod-record.json").write_text("{}")
    with pytest.raises(TraceLoadError, match="holds 2 traces"):
        load_traces(tmp_path)


def test_plain_folder_of_rank_files_is_not_affected(tmp_path: Path) -> None:
    _trace(tmp_path / "a" / "rank0.json")
    _trace(tmp_path / "b" / "rank1.json")
    assert load_traces(tmp_path).ranks == [0, 1]
