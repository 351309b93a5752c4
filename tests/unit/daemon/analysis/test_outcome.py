"""A worker's end made into the trace's summary: a good output gets the daemon's fields; every hostile or broken
output (garbage, NaN, huge or deep documents, links, another trace's summary) is BAD_OUTPUT, never an exception;
exits and signals map to their failures."""

from __future__ import annotations

import gzip
import json
import os
import signal
from pathlib import Path

import pytest

from dyno.daemon.analysis.outcome import MAX_PARTS_BYTES, MAX_SUMMARY_BYTES, outcome_of
from dyno.daemon.analysis.runner import LOG_FILE, WorkerExit
from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.analysis.worker_main import FAILURE_FILE, NO_TRACE_EXIT, OUT_OF_MEMORY_EXIT, PARTS_FILE, SUMMARY_FILE
from dyno.trace_summary import AnalysisFailure, AnalysisState, RankStepStats, RuleLoss, TraceSummary

pytestmark = pytest.mark.unit

JOB = AnalysisJob("periodic-j-1", ("/f",), "job-7", "alice", 1000, "node1", 1_700_000_000_000)
GOOD = TraceSummary(
    "periodic-j-1",
    job_id="worker's guess",
    state=AnalysisState.DONE,
    rules=(RuleLoss("dataloader", "HIGH", 0.25, 1e6, 2, "slow", "more workers"),),
    ranks=(RankStepStats(0, steps=5, mean_step_us=100.0), RankStepStats(1, steps=5)),
    analysed_window="5 profiler steps",
)


def _write(tmp_path: Path, summary: bytes | None = None, parts: bytes = b"") -> None:
    if summary is not None:
        (tmp_path / SUMMARY_FILE).write_bytes(summary)
    (tmp_path / PARTS_FILE).write_bytes(parts)


def _doc(**changes: object) -> bytes:
    doc = GOOD.to_json()
    doc["rank_parts_thinned"] = True
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_good_output_is_done_with_the_daemons_fields(tmp_path: Path) -> None:
    parts = gzip.compress(b'{"schema": "dyno.trace_analysis.rank_parts"}')
    _write(tmp_path, _doc(), parts)
    o = outcome_of(JOB, WorkerExit(0, False, False, 2.5, tmp_path), now_ms=1_700_000_001_000)
    s = o.summary
    assert s.state == AnalysisState.DONE and s.failure == AnalysisFailure.NONE
    assert (s.job_id, s.user, s.hostname, s.periodic) == ("job-7", "alice", "node1", True)
    assert (s.trace_finished_ms, s.analyzed_ms, s.analysis_cpu_s) == (1_700_000_000_000, 1_700_000_001_000, 2.5)
    assert s.rules == GOOD.rules and s.ranks == GOOD.ranks and s.analysed_window == "5 profiler steps"
    assert o.rank_parts == parts and o.thinned and s.extra == {}


@pytest.mark.parametrize(
    ("summary", "parts", "words"),
    [
        (None, b"", "no summary.json"),
        (b"", b"", "no summary.json"),
        (b"{not json", b"", "not JSON"),
        (b"\xff\xfe\x00", b"", "not JSON"),
        (_doc(analysis_cpu_s=float("nan")), b"", "not a number JSON allows"),
        (b'{"a": Infinity}', b"", "not a number JSON allows"),
        (b"[" * 100_000 + b"]" * 100_000, b"", "not JSON"),
        (b'{"x": ' + b"[" * 40 + b"]" * 40 + b"}", b"", "nested too deep"),
        (b"1" * 5000, b"", "not JSON"),  # past int()'s digit limit
        (_doc(trace_id="another"), b"", "of trace 'another'"),
        (_doc(rules="all"), b"", "rules: expected a list"),
        (_doc(ranks=[{"rank": 0, "steps": -1}]), b"", "steps"),
        (_doc(rank_parts_thinned="yes"), b"", "rank_parts_thinned"),
        (_doc(schema="something else"), b"", "not a dyno.trace_summary document"),
        (b" " * (MAX_SUMMARY_BYTES + 1), b"", "more than"),
        (_doc(), b"plain bytes", "not gzip"),
        (_doc(), b"\x1f\x8b" + b"\0" * MAX_PARTS_BYTES, "more than"),
    ],
)
def test_a_broken_or_hostile_output_is_bad_output(
    tmp_path: Path, summary: bytes | None, parts: bytes, words: str
) -> None:
    _write(tmp_path, summary, parts)
    s = outcome_of(JOB, WorkerExit(0, False, False, 1.0, tmp_path), now_ms=5).summary
    assert (s.state, s.failure) == (AnalysisState.FAILED, AnalysisFailure.BAD_OUTPUT)
    assert words in s.failure_message and len(s.failure_message) <= 1024
    assert (s.job_id, s.user, s.analyzed_ms, s.rules, s.ranks) == ("job-7", "alice", 5, (), ())
    assert s.trace_finished_ms == JOB.trace_finished_ms > 0  # a job's latest is ordered by it (store.py)


def test_a_link_in_place_of_an_output_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(GOOD.to_json().__repr__())
    os.symlink(secret, tmp_path / SUMMARY_FILE)
    s = outcome_of(JOB, WorkerExit(0, False, False, 1.0, tmp_path), now_ms=5).summary
    assert s.failure == AnalysisFailure.BAD_OUTPUT and "summary.json" in s.failure_message


def test_a_fifo_in_place_of_an_output_file_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / SUMMARY_FILE)
    s = outcome_of(JOB, WorkerExit(0, False, False, 1.0, tmp_path), now_ms=5).summary
    assert s.failure == AnalysisFailure.BAD_OUTPUT and "not a plain file" in s.failure_message


@pytest.mark.parametrize(
    ("end", "failure", "words"),
    [
        (WorkerExit(-signal.SIGKILL, True, False, 9.0, Path()), AnalysisFailure.TIMED_OUT, "analysis_timeout_s"),
        (
            WorkerExit(-signal.SIGKILL, False, False, 1.0, Path()),
            AnalysisFailure.CRASHED,
            "OOM killer when dynod's unit ran out of memory, or by someone): boom",
        ),
        (WorkerExit(-signal.SIGXFSZ, False, False, 1.0, Path()), AnalysisFailure.CRASHED, "file size limit"),
        (WorkerExit(2, False, False, 1.0, Path()), AnalysisFailure.CRASHED, "exited with status 2: boom"),
        (WorkerExit(NO_TRACE_EXIT, False, False, 1.0, Path()), AnalysisFailure.NO_TRACE, "nothing loads"),
        (WorkerExit(OUT_OF_MEMORY_EXIT, False, False, 1.0, Path()), AnalysisFailure.OUT_OF_MEMORY, "nothing loads"),
    ],
)
def test_exits_and_signals_are_their_failures(
    tmp_path: Path, end: WorkerExit, failure: AnalysisFailure, words: str
) -> None:
    (tmp_path / LOG_FILE).write_bytes(b"x" * 10_000 + b"\nTraceback...\nboom\n")
    (tmp_path / FAILURE_FILE).write_text("nothing loads\n")
    s = outcome_of(JOB, WorkerExit(end.exit_code, end.timed_out, False, end.cpu_s, tmp_path), now_ms=5).summary
    assert (s.state, s.failure) == (AnalysisState.FAILED, failure)
    assert words in s.failure_message and s.analysis_cpu_s == end.cpu_s
    assert s.trace_finished_ms == JOB.trace_finished_ms > 0
