"""Two files of a folder claiming one rank: the one whose own distributedInfo names the rank is kept, whatever the
path order: a file ranked only by its name ("rank0.json") never drops a trace that says "rank": 0 itself
("rank2.json.gz", copied from another job), whose rank the report would then miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis.loader import load_traces

pytestmark = pytest.mark.unit


def _write(path: Path, rank: int | None, name: str = "aten::add") -> Path:
    doc: dict = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": name, "ts": 1, "dur": 5, "pid": 1, "tid": 1}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 4}
    path.write_text(json.dumps(doc))
    return path


def test_distributed_info_wins_over_a_file_name_rank_loaded_first(tmp_path):
    _write(tmp_path / "a_rank0.json", None, name="by_name")  # rank 0 from its name, first in path order
    _write(tmp_path / "b_rank2.json", 0, name="by_info")  # rank 0 from its distributedInfo
    m = load_traces(tmp_path)
    assert m.ranks == [0] and m[0].meta.rank_source == "distributedInfo"
    assert m[0].names(m[0].events) == ["by_info"]
    (err,) = m.errors
    assert Path(err.path).name == "a_rank0.json"
    assert err.reason == f"duplicate rank 0 (rank 0 is {tmp_path / 'b_rank2.json'}, by its distributedInfo)"


def test_first_in_path_order_is_kept_between_equals(tmp_path):
    _write(tmp_path / "a.json", 1, name="first")
    _write(tmp_path / "b.json", 1, name="second")
    m = load_traces(tmp_path)
    assert m[1].names(m[1].events) == ["first"]
    (err,) = m.errors
    assert Path(err.path).name == "b.json" and "by its distributedInfo" in err.reason
    (tmp_path / "c").mkdir()
    _write(tmp_path / "c" / "rank3.json", None)
    _write(tmp_path / "d_rank3.json", None)
    m = load_traces(tmp_path)
    assert Path(m[3].meta.path).parent.name == "c"  # both ranked by name: path order
    assert any("duplicate rank 3" in e.reason and "by its file name" in e.reason for e in m.errors)


def test_good_ranks_load_beside_bad_ones(tmp_path):
    _write(tmp_path / "rank0.json", 0)
    (tmp_path / "rank1.json").write_text('{"traceEvents": [{"ph": "X"')
    (tmp_path / "rank2.json").write_text("")
    _write(tmp_path / "rank3.json", 3)
    m = load_traces(tmp_path)
    assert m.ranks == [0, 3]
    reasons = {Path(e.path).name: e.reason for e in m.errors}
    assert "truncated" in reasons["rank1.json"] and reasons["rank2.json"] == "empty file"
