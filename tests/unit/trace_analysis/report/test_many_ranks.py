"""The text, HTML and JSON reports of a job of many ranks, merged from generated ranks' parts as `dyno-cli trace
--summaries` merges them: up to 16 ranks a section per rank (as it always was); past 16 the cross-rank view (the
slowest and fastest ranks, a rule's findings on many ranks as one line, the straggler named); --all-ranks the
per-rank report whatever the count; the JSON keeps every rank, on one line past 16."""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path

import pytest
from multirank_jobs import cpu_job, gpu_job, many_rank_report

from dyno.trace_analysis import analyze
from dyno.trace_analysis.cli import add_analyze_arguments, run_analyze
from dyno.trace_analysis.report import render_html, render_json, render_text
from dyno.trace_analysis.report.model import Report
from dyno.trace_analysis.report.rank_groups import RANK_THRESHOLD

pytestmark = pytest.mark.unit

SLOW = 5


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Report]:
    """Reports of 16, 17 and 40 ranks, rank 5 the slow one in each."""
    return {n: many_rank_report(tmp_path_factory.mktemp(f"job{n}"), n, SLOW) for n in (16, 17, 40)}


def sections(text: str) -> set[int]:
    """The ranks with a per-rank summary section ("rank N  source")."""
    return {int(m) for m in re.findall(r"^rank (\d+)  \S", text, re.M)}


def test_up_to_the_threshold_a_section_per_rank_and_all_ranks_changes_nothing(reports: dict[int, Report]) -> None:
    r = reports[RANK_THRESHOLD]
    text = render_text(r)
    assert sections(text) == set(range(16))
    assert text == render_text(r, all_ranks=True)
    assert "--all-ranks" not in text
    assert len(re.findall(r"^ ?\d+\. \[", text, re.M)) == len(r.findings)  # a finding per rank, each on its own
    assert render_html(r) == render_html(r, all_ranks=True)


def test_past_the_threshold_one_cross_rank_view(reports: dict[int, Report]) -> None:
    r = reports[RANK_THRESHOLD + 1]
    text = render_text(r, width=0)
    assert sections(text) == {SLOW}  # the slowest rank in full, no other section
    lines = text.splitlines()
    head = lines.index(next(x for x in lines if x.startswith("ranks: the 5 slowest and the 5 fastest")))
    assert "of 17 (--all-ranks: a section per rank)" in lines[head]
    rows = [x.split() for x in lines[head + 2 : head + 13] if x.split()[0] != "..."]
    assert len(rows) == 10 and rows[0][:3] == [str(SLOW), "160.0", "ms"]  # the slowest first
    assert [int(x[0]) for x in rows[-5:]] == [8, 10, 12, 14, 16]  # the fastest: the even ranks' 100 ms
    assert next(x for x in lines if x.startswith("step time across 17 ranks")).endswith(
        "slowest 160.0 ms (rank 5), spread 60.0% of the median"
    )
    # each rule on every rank is one numbered line; the straggler is named once with its rank
    numbered = [x for x in lines if re.match(r"^ ?\d+\. \[", x)]
    assert len(numbered) == len({f.rule_id for f in r.findings}) < len(r.findings)
    assert any(
        re.search(
            r"\] exposed-comm: 17 of 17 ranks, lost median 50\.0% \(\d+\.\d%\.\.50\.0%\) of the window, "
            r"e\.g\. rank \d+: ",
            x,
        )
        for x in numbered
    )
    assert any("] straggler (rank 5): rank 5 is a straggler among 17 ranks" in x for x in numbered)
    assert "ranks with findings: 17 of 17: 0-16" in text
    assert text.count("top GPU kernels") == 1  # the slowest rank's tables only


def test_all_ranks_restores_the_per_rank_report(reports: dict[int, Report]) -> None:
    r = reports[40]
    full = render_text(r, all_ranks=True)
    assert sections(full) == set(range(40))
    assert len(re.findall(r"^ ?\d+\. \[", full, re.M)) == len(r.findings)
    short = render_text(r)
    assert len(short) < len(full) / 3 and sections(short) == {SLOW}


def test_html_past_the_threshold(reports: dict[int, Report]) -> None:
    r = reports[40]
    html = render_html(r)
    summary = html.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    assert summary.count("<tr><td>") == 10 and "<tr><td>5</td>" in summary
    assert "The 10 slowest and fastest of 40 ranks" in html
    assert "exposed-comm: 40 of 40 ranks" in html and "straggler</b> (rank 5)" in html
    assert html.count("<h3>rank ") == 1
    assert "rank_39_mean_step" not in html and " more (in the JSON report)" in html  # the straggler's 80 counts
    full = render_html(r, all_ranks=True)
    assert full.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0].count("<tr><td>") == 40
    assert full.count("<h3>rank ") == 40 and "of 40 ranks" not in full


def test_json_keeps_every_rank_on_one_line_past_the_threshold(reports: dict[int, Report]) -> None:
    small, big = render_json(reports[16]), render_json(reports[40])
    assert small.count("\n") > 100 and big.count("\n") == 1
    doc = json.loads(big)
    assert [x["rank"] for x in doc["ranks"]] == list(range(40))
    assert len(doc["findings"]) == len(reports[40].findings)
    assert doc["ranks"][SLOW]["steps"]["mean_us"] == pytest.approx(160_000.0)
    assert json.loads(render_json(reports[40], indent=True)) == doc


def test_dyno_cli_analyze_all_ranks(tmp_path: Path) -> None:
    gpu_job(tmp_path, [100_000.0] * 17 + [150_000.0])

    def cli(*argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        assert (
            run_analyze(
                add_analyze_arguments(argparse.ArgumentParser()).parse_args([str(tmp_path), *argv]), out=out, err=err
            )
            == 0
        ), err.getvalue()
        return out.getvalue()

    assert sections(cli()) == {17}
    assert sections(cli("--all-ranks")) == set(range(18))


def test_a_cpu_only_job_of_many_ranks(tmp_path: Path) -> None:
    """CPU-only ranks: the table says so, the GPU rules are not applicable once, the slowest rank's host time."""
    r = analyze(cpu_job(tmp_path, [100_000.0] * 17 + [200_000.0]), workers=1)
    text = render_text(r, width=0)
    assert sections(text) == {17}
    row = next(x for x in text.splitlines() if x.split()[:1] == ["17"])
    assert row.split()[1:3] == ["200.0", "ms"] and "no GPU" in row
    assert text.count("not applicable to these traces: ") == 1
    assert text.count("host time in the window") == 1
