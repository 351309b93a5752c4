"""The cross-rank step over the hosts' summaries (client.trace.summaries): parts from two "hosts", each analysed
where its files are, merge into the report of the whole job (the planted straggler named, as from the raw files);
a host left out is one of the report's errors with its reason; a rank sent twice is kept once; hosts that ran
different rule sets merge over the rules they share; the answers' states read as documented."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import msgspec
import pytest
from multirank_jobs import gpu_job

from dyno.client.hosts import Host
from dyno.client.trace.summaries import HostSummary, apply_answer, merge_report
from dyno.trace_analysis import analyze
from dyno.trace_analysis.host_summary import summarize_trace
from dyno.trace_analysis.part_codec import decode_parts
from dyno.trace_analysis.report import render_json, render_text
from dyno.trace_summary import AnalysisFailure, AnalysisState
from dyno.trace_summary_pb import summary_to_proto

pytestmark = pytest.mark.unit

STEPS = [100_000, 101_000, 99_500, 160_000]  # rank 3 is the straggler


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gpu_job(tmp_path_factory.mktemp("job"), STEPS)


def host_of(job: Path, name: str, ranks: list[int]) -> HostSummary:
    """What a host holding ``ranks`` sends (its own analysis, through the wire's proto), as gathered."""
    h = summarize_trace([str(job / f"rank-{r}.json") for r in ranks], trace_id="t1")
    h2 = HostSummary(Host(name, 1778))
    apply_answer(h2, summary_to_proto(h.summary, h.rank_parts, h.thinned))
    return h2


def without_sources(report_json: str) -> dict[str, object]:
    doc = json.loads(report_json)
    doc.pop("sources")
    return doc


def test_two_hosts_merge_into_the_job_report_with_its_straggler(job: Path) -> None:
    a, b = host_of(job, "node-a", [0, 1]), host_of(job, "node-b", [2, 3])
    assert a.merged and b.merged and a.state == "done"
    report = merge_report([b, a])  # in any host order: the ranks come out in rank order
    assert [r.rank for r in report.ranks] == [0, 1, 2, 3]
    (st,) = report.findings_of("straggler")
    assert st.rank == 3 and "straggler among 4 ranks" in st.title
    assert report.sources[0] == f"node-a:1778:{job / 'rank-0.json'}"
    # the report of the raw files, analysed in one place, save where they were read from
    assert without_sources(render_json(report)) == without_sources(render_json(analyze(job, workers=1)))
    assert report.errors == ()
    text = render_text(report, width=0)
    assert "step time across 4 ranks: median 100.5 ms, fastest 99.5 ms (rank 2), slowest 160.0 ms (rank 3)" in text


def test_a_failed_host_is_named_with_its_reason_and_the_others_merged(job: Path) -> None:
    a = host_of(job, "node-a", [0, 1, 2])
    failed = HostSummary(Host("node-b", 1778))
    s = dataclasses.replace(a.summary, state=AnalysisState.DONE).failed(AnalysisFailure.CRASHED, "worker killed", 1)
    apply_answer(failed, summary_to_proto(s))
    assert failed.state == "failed" and not failed.merged
    assert failed.error == "analysis failed (CRASHED): worker killed"
    report = merge_report([a, failed])
    assert [r.rank for r in report.ranks] == [0, 1, 2]
    assert [(e.path, e.reason) for e in report.errors] == [("node-b:1778", "analysis failed (CRASHED): worker killed")]


def test_disabled_empty_or_unreadable_parts_are_not_merged(job: Path) -> None:
    a = host_of(job, "node-a", [0])
    base = a.summary
    disabled = HostSummary(Host("d"))
    apply_answer(disabled, summary_to_proto(dataclasses.replace(base, state=AnalysisState.DISABLED)))
    assert disabled.state == "disabled" and "does not analyse traces" in disabled.error
    empty = HostSummary(Host("e"))
    apply_answer(empty, summary_to_proto(base, b"", True))
    assert empty.state == "done" and not empty.merged and "no rank parts" in empty.error
    garbage = HostSummary(Host("g"))
    apply_answer(garbage, summary_to_proto(base, b"\x1f\x8bnot really", False))
    assert not garbage.merged and "its rank parts cannot be read: rank parts: corrupt gzip data" in garbage.error
    running = HostSummary(Host("r"))
    apply_answer(running, summary_to_proto(dataclasses.replace(base, state=AnalysisState.RUNNING)))
    assert running.state == "running" and not running.finished
    report = merge_report([a, disabled, empty, garbage])
    assert [e.path for e in report.errors] == ["d:1778", "e:1778", "g:1778"]


def test_a_rank_sent_by_two_hosts_is_kept_once(job: Path) -> None:
    a, b = host_of(job, "node-a", [0, 1]), host_of(job, "node-b", [1, 2])
    report = merge_report([a, b])
    assert [r.rank for r in report.ranks] == [0, 1, 2]
    (problem,) = report.errors
    assert problem.path.startswith("node-b:1778:") and problem.reason == "rank 1 also comes from node-a:1778: left out"


def test_hosts_with_different_rule_sets_merge_over_the_rules_they_share(job: Path) -> None:
    a, b = host_of(job, "node-a", [0, 1]), host_of(job, "node-b", [2, 3])
    # node-b runs an older dyno without sync-calls, and a newer one's rule this dyno does not know
    old = [
        msgspec.structs.replace(
            p,
            rules=tuple(
                (msgspec.structs.replace(o, rule_id="future-rule") if o.rule_id == "tiny-ops" else o, f)
                for o, f in p.rules
                if o.rule_id != "sync-calls"
            ),
        )
        for p in b.parts
    ]
    b = dataclasses.replace(b, parts=tuple(old))
    report = merge_report([a, b])
    assert "sync-calls" not in report.rule_ids and "tiny-ops" not in report.rule_ids
    assert "future-rule" not in report.rule_ids
    assert {"straggler", "exposed-comm"} <= set(report.rule_ids)
    (st,) = report.findings_of("straggler")
    assert st.rank == 3


def test_the_thinned_flag_and_parts_travel(job: Path) -> None:
    h = summarize_trace([str(job / "rank-0.json")], trace_id="t1")
    got = HostSummary(Host("x"))
    apply_answer(got, summary_to_proto(h.summary, h.rank_parts, True))
    assert got.thinned and [p.rank for p in got.parts] == [p.rank for p in decode_parts(h.rank_parts)]
    assert got.to_dict()["ranks"] == [0] and got.to_dict()["state"] == "done"
