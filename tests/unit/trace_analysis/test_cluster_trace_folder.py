"""A folder holding the dynod folders of *one* cluster trace collected from several hosts (``h1/<id>/``,
``h2/<id>/``, each with its ``dynod-record.json``: a cluster trace has one id on every host) holds the ranks of one
job, not several traces. Different ids are still refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis.loader import TraceLoadError, load_traces

pytestmark = pytest.mark.unit

T1, T2 = "20261201T050000-aaaaaaaa", "20261201T060000-bbbbbbbb"


def _daemon_folder(root: Path, host: str, trace_id: str, rank: int) -> None:
    d = root / host / trace_id
    d.mkdir(parents=True)
    (d / "dynod-record.json").write_text("{}")
    ev = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 5, "pid": 1, "tid": 1}
    (d / f"{host}_{rank}.pt.trace.json").write_text(
        json.dumps({"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": [ev]})
    )


def test_one_trace_id_collected_from_two_hosts_loads_as_ranks(tmp_path: Path) -> None:
    _daemon_folder(tmp_path, "h1", T1, 0)
    _daemon_folder(tmp_path, "h2", T1, 1)
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1] and not m.errors


def test_two_trace_ids_from_two_hosts_are_still_refused(tmp_path: Path) -> None:
    _daemon_folder(tmp_path, "h1", T1, 0)
    _daemon_folder(tmp_path, "h2", T2, 1)
    with pytest.raises(TraceLoadError, match=f"holds 2 traces \\(h1/{T1}, h2/{T2}\\)"):
        load_traces(tmp_path)
