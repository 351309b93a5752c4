"""One host's analysis of a trace (trace_analysis.host_summary): the compact summary's figures against the full
report of the same files, on generated CPU jobs and the shared GPU traces; its rank parts merge back into that
report; nothing loadable is an AnalysisError."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from multirank_jobs import cpu_job

from dyno.trace_analysis import analyze
from dyno.trace_analysis.api import AnalysisError, report_of
from dyno.trace_analysis.host_summary import rule_losses, summarize_trace
from dyno.trace_analysis.part_codec import decode_parts
from dyno.trace_analysis.report import render_json
from dyno.trace_analysis.report.model import RankSummary, Report
from dyno.trace_analysis.rules import Evidence, Finding, Severity, select_rules
from dyno.trace_analysis.rules.engine import RuleOutcome, resolve_rule_thresholds
from dyno.trace_summary import AnalysisState, TraceSummary

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

RULES = select_rules(None)
RESOLVED = resolve_rule_thresholds(None)


@pytest.fixture(scope="module")
def cpu_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cpu_job(tmp_path_factory.mktemp("job"), [100_000, 101_000, 99_500, 160_000])


def test_cpu_job_summary_matches_its_report(cpu_folder: Path) -> None:
    full = analyze(cpu_folder, workers=1)
    h = summarize_trace([str(cpu_folder)], trace_id="t-cpu")
    s = h.summary
    assert s.trace_id == "t-cpu" and s.state is AnalysisState.DONE and s.analyzed_ms > 0
    assert s.job_id == s.user == s.hostname == "" and not s.periodic  # the daemon's to fill
    assert s.analysed_window == "3 profiler steps"
    by_rule = {r.rule: r for r in s.rules}
    assert set(by_rule) == {f.rule_id for f in full.findings} == {"dataloader", "straggler"}
    dl = full.findings_of("dataloader")
    assert by_rule["dataloader"].time_lost_share == pytest.approx(sum(f.evidence.share for f in dl) / 4)
    assert by_rule["dataloader"].time_lost_us == pytest.approx(sum(f.evidence.time_lost_us for f in dl))
    assert by_rule["dataloader"].ranks == 4 and by_rule["dataloader"].severity == "HIGH"
    assert by_rule["dataloader"].title == dl[0].title and by_rule["dataloader"].fix == dl[0].fix
    (st,) = full.findings_of("straggler")
    # a cross-rank finding is every rank's loss: its share, not divided by the ranks
    assert by_rule["straggler"].time_lost_share == pytest.approx(st.evidence.share)
    assert by_rule["straggler"].ranks == 1 and "rank 3" in by_rule["straggler"].title
    assert [r.time_lost_share for r in s.rules] == sorted((r.time_lost_share for r in s.rules), reverse=True)
    assert [(r.rank, r.steps, r.mean_step_us) for r in s.ranks] == [
        (0, 3, 100_000.0),
        (1, 3, 101_000.0),
        (2, 3, 99_500.0),
        (3, 3, 160_000.0),
    ]
    assert not any(r.has_gpu for r in s.ranks)
    # what the worker writes and the daemon reads back passes the summary's checks
    assert TraceSummary.from_json(s.to_json()) == s
    # the parts render the report of the same files
    assert not h.thinned
    merged = report_of(decode_parts(h.rank_parts), RULES, RESOLVED, (), full.sources)
    assert render_json(merged) == render_json(full)


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared GPU traces not found at {SHARED_TRACES}")
@pytest.mark.parametrize("name", ["negative_queue_length_values_check", "trace_filter"])
def test_gpu_trace_summary_figures(name: str) -> None:
    folder = SHARED_TRACES / name
    full = analyze(folder, workers=1)
    s = summarize_trace([str(folder)], trace_id="t-gpu").summary
    assert [r.rank for r in s.ranks] == [r.rank for r in full.ranks]
    for got, rank in zip(s.ranks, full.ranks, strict=True):
        b = rank.breakdown
        assert got.has_gpu and b is not None
        assert got.gpu_idle_share == pytest.approx(b.idle_us / b.span_us)
        assert got.gpu_compute_share == pytest.approx(b.compute_us / b.span_us)
        assert got.window_us == rank.window_us
        assert got.steps == (rank.steps.count if rank.steps else 0)
    assert {r.rule for r in s.rules} == {f.rule_id for f in full.findings}
    windows = {r.rank: r.window_us for r in full.ranks}
    for loss in s.rules:
        found = full.findings_of(loss.rule)
        assert loss.severity == max((f.severity for f in found), key=lambda v: v.rank).name
        assert 0.0 <= loss.time_lost_share <= 1.0
        per_rank: dict[int | None, float] = {}
        for f in found:
            share = f.evidence.share
            share = f.evidence.time_lost_us / windows[f.rank] if share is None else share
            per_rank[f.rank] = per_rank.get(f.rank, 0.0) + share
        if loss.rule != "straggler":
            expected = sum(min(1.0, v) for v in per_rank.values()) / len(full.ranks)
            assert loss.time_lost_share == pytest.approx(min(1.0, expected))
    assert TraceSummary.from_json(s.to_json()) == s


def _rank(rank: int, window_us: float) -> RankSummary:
    return RankSummary(rank, f"r{rank}", False, 10, window_us, "trace span", window_us, None, None)


def _finding(rule: str, rank: int | None, lost_us: float, share: float | None, sev: Severity) -> Finding:
    return Finding(rule, sev, f"{rule} on {rank}", Evidence(time_lost_us=lost_us, share=share), "fix it", rank)


def test_rule_losses_without_a_share_use_the_rank_window() -> None:
    findings = (
        _finding("sync-calls", 0, 100.0, 0.25, Severity.HIGH),
        _finding("sync-calls", 0, 50.0, None, Severity.LOW),  # 50 of rank 0's 1000 µs
        _finding("tiny-ops", 1, 400.0, None, Severity.MEDIUM),  # 400 of rank 1's 2000 µs
        _finding("tiny-ops", 1, 5000.0, 0.9, Severity.MEDIUM),  # over 1 summed: capped at 1 for the rank
    )
    outcomes = (RuleOutcome("straggler", None, "clean"),)
    report = Report(("a",), (_rank(0, 1000.0), _rank(1, 2000.0)), findings, outcomes, {})
    got = {r.rule: r for r in rule_losses(report, [object(), object()])}  # type: ignore[list-item]
    assert got["sync-calls"].time_lost_share == pytest.approx((0.25 + 0.05) / 2)
    assert got["sync-calls"].severity == "HIGH" and got["sync-calls"].ranks == 1
    assert got["sync-calls"].time_lost_us == 150.0 and got["sync-calls"].title == "sync-calls on 0"
    assert got["tiny-ops"].time_lost_share == pytest.approx(1.0 / 2)
    assert list(got) == ["tiny-ops", "sync-calls"]  # most time lost first
    assert all(math.isfinite(r.time_lost_share) for r in got.values())


def test_nothing_loadable_is_an_analysis_error(tmp_path: Path) -> None:
    bad = tmp_path / "rank-0.json"
    bad.write_text('{"traceEvents": [{"ph": ')
    with pytest.raises(AnalysisError, match="rank-0.json"):
        summarize_trace([str(bad)], trace_id="t")
    with pytest.raises(AnalysisError, match="no trace could be analysed"):
        summarize_trace([str(tmp_path / "missing")], trace_id="t")


def test_a_bad_file_beside_good_ones_is_left_out(cpu_folder: Path, tmp_path: Path) -> None:
    bad = tmp_path / "rank-9.json"
    bad.write_text("not json")
    files = [str(p) for p in sorted(cpu_folder.glob("rank-*.json"))][:2] + [str(bad)]
    s = summarize_trace(files, trace_id="t").summary
    assert [r.rank for r in s.ranks] == [0, 1]


def test_parts_that_cannot_fit_leave_the_summary(cpu_folder: Path) -> None:
    h = summarize_trace([str(cpu_folder)], trace_id="t", max_parts_bytes=100)
    assert h.rank_parts == b"" and h.thinned
    assert h.summary.state is AnalysisState.DONE and h.summary.rules
