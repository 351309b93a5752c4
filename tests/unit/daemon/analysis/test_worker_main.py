"""The worker's own protocol: its files and exit statuses for a done analysis, no loadable file, and MemoryError
(summarize_trace replaced; the real one runs in tests/integration/test_host_analysis.py)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from dyno.daemon.analysis import worker_main
from dyno.trace_analysis import host_summary
from dyno.trace_analysis.api import AnalysisError
from dyno.trace_summary import AnalysisState, TraceSummary

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

SHARED = SHARED_TRACES / "simple_add"


def _run(tmp_path: Path, *files: str) -> int:
    return worker_main.main(["--trace-id", "t-1", "--out", str(tmp_path), "--", *files])


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared GPU traces not found")
def test_a_trace_that_loads_gives_its_summary_and_rank_parts(tmp_path: Path) -> None:
    assert _run(tmp_path, *(str(f) for f in sorted(SHARED.iterdir()))) == 0
    doc = json.loads((tmp_path / worker_main.SUMMARY_FILE).read_text())
    summary = TraceSummary.from_json(doc)
    assert summary.trace_id == "t-1" and summary.state == AnalysisState.DONE and len(summary.ranks) == 1
    assert doc[worker_main.THINNED_KEY] is False
    parts = gzip.decompress((tmp_path / worker_main.PARTS_FILE).read_bytes())
    assert json.loads(parts)["schema"] == "dyno.trace_analysis.rank_parts"


def test_nothing_loadable_is_no_trace_with_the_reason(tmp_path: Path) -> None:
    garbage = tmp_path / "h_1.pt.trace.json"
    garbage.write_text('{"traceEvents": [{"ph": "X", "na')
    out = tmp_path / "out"
    out.mkdir()
    assert worker_main.main(["--trace-id", "t-1", "--out", str(out), "--", str(garbage)]) == worker_main.NO_TRACE_EXIT
    assert "no trace could be analysed" in (out / worker_main.FAILURE_FILE).read_text()
    assert not (out / worker_main.SUMMARY_FILE).exists()


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        (MemoryError(), worker_main.OUT_OF_MEMORY_EXIT, "analysis_memory_mb"),
        (AnalysisError(""), worker_main.NO_TRACE_EXIT, "no file of the trace could be loaded"),
    ],
)
def test_memory_and_analysis_errors_are_their_exit_statuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, code: int, words: str
) -> None:
    def fail(paths, *, trace_id):  # type: ignore[no-untyped-def]
        raise error

    monkeypatch.setattr(host_summary, "summarize_trace", fail)
    trace = tmp_path / "h_1.pt.trace.json"
    trace.write_text("{}")
    assert _run(tmp_path, str(trace)) == code
    assert words in (tmp_path / worker_main.FAILURE_FILE).read_text()


def test_a_fifo_or_a_folder_in_place_of_a_trace_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A FIFO would block the loader (it streams pipes) until the worker's timeout: it is never opened."""
    fifo = tmp_path / "h_1.pt.trace.json"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    code = worker_main.main(["--trace-id", "t-1", "--out", str(out), "--", str(fifo), str(tmp_path / "folder")])
    assert code == worker_main.NO_TRACE_EXIT
    failure = (out / worker_main.FAILURE_FILE).read_text()
    assert f"{fifo} is not a plain file" in failure and f"{tmp_path / 'folder'} is not a plain file" in failure
