"""Threshold parsing, rule selection, report renderers and the analyze CLI (exit codes, one-line errors)."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import AnalysisError, analyze
from dyno.trace_analysis.cli import add_analyze_arguments, run_analyze
from dyno.trace_analysis.report import SCHEMA, SCHEMA_VERSION, render_html, render_json, render_text
from dyno.trace_analysis.rules import (
    ALL_RULES,
    ThresholdError,
    UnknownRuleError,
    parse_threshold_args,
    resolve_thresholds,
    select_rules,
)

pytestmark = pytest.mark.unit

DEFAULTS = {r.id: r.thresholds for r in ALL_RULES}


def _trace(tmp_path, name="t.json"):
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 2000.0, 2000.0)
    t = 0.0
    for _ in range(50):
        b.launch("small_kernel", t, t + 6.0, 4.0)
        t += 100.0
    b.runtime("cudaStreamSynchronize", 2500.0, 40.0)
    return b.write(tmp_path / name)


def _cli(*argv: str):
    parser = add_analyze_arguments(argparse.ArgumentParser())
    out, err = io.StringIO(), io.StringIO()
    rc = run_analyze(parser.parse_args(list(argv)), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


# ---- thresholds -------------------------------------------------------------------------------------------
def test_thresholds_parse_and_coerce():
    got = resolve_thresholds(
        DEFAULTS, parse_threshold_args(["low-gpu-util.min_util=40%", "launch-queue.queue_limit=2"])
    )
    assert got["low-gpu-util"]["min_util"] == pytest.approx(0.4)
    assert got["launch-queue"]["queue_limit"] == 2 and isinstance(got["launch-queue"]["queue_limit"], int)
    got = resolve_thresholds(DEFAULTS, {"sync-calls": {"skip_first_step": "false"}})
    assert got["sync-calls"]["skip_first_step"] is False
    assert got["dataloader"]["max_share"] == 0.05  # untouched defaults stay


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"nope.x": 1}, "unknown rule 'nope'"),
        (
            {"low-gpu-util.nope": 1},
            "unknown key 'nope' (keys of low-gpu-util: chunks, min_low_chunks, min_startup_share, min_util)",
        ),
        ({"low-gpu-util.min_util": "abc"}, "expected a number"),
        ({"launch-queue.queue_limit": "1.5"}, "expected an integer"),
        ({"low-gpu-util.min_util": "-1"}, "non-negative"),
        ({"sync-calls.skip_first_step": "maybe"}, "expected true/false"),
        ({"min_util": 1}, "expected RULE.KEY"),
    ],
)
def test_threshold_errors_are_clear(override, message):
    with pytest.raises(ThresholdError, match=None) as exc:
        resolve_thresholds(DEFAULTS, override)
    assert message in str(exc.value)


def test_threshold_arg_syntax_and_rule_selection():
    with pytest.raises(ThresholdError, match="expected RULE.KEY=VALUE"):
        parse_threshold_args(["low-gpu-util.min_util"])
    assert [r.id for r in select_rules(["sync-calls,dataloader"])] == ["sync-calls", "dataloader"]
    assert "straggler" not in [r.id for r in select_rules(["-straggler"])]
    with pytest.raises(UnknownRuleError, match="unknown rule 'bogus'"):
        select_rules(["bogus"])


# ---- renderers ---------------------------------------------------------------------------------------------
def test_json_report_schema(tmp_path):
    doc = json.loads(render_json(analyze(_trace(tmp_path))))
    assert doc["schema"] == SCHEMA == "dyno.trace_analysis.report" and doc["version"] == SCHEMA_VERSION == 2
    assert set(doc) >= {"sources", "ranks", "findings", "rules", "thresholds", "errors"}
    rank = doc["ranks"][0]
    assert rank["has_gpu"] and rank["steps"]["count"] == 3 and rank["breakdown"]["idle_pct"] > 50
    f = doc["findings"][0]
    assert set(f) == {"rule", "severity", "title", "rank", "evidence", "fix"}
    assert set(f["evidence"]) == {
        "time_lost_us",
        "time_lost_basis",  # added in v1 (additive)
        "no_time_lost_reason",  # added in v1 (additive)
        "share",
        "share_of",
        "counts",
        "examples",
    }
    for ex in f["evidence"]["examples"]:
        # offset_us and note: added in v1
        assert set(ex) == {"name", "ts_us", "offset_us", "dur_us", "where", "note"}
    assert {o["status"] for o in doc["rules"]} <= {"findings", "clean", "skipped", "error"}
    lost = [x["evidence"]["time_lost_us"] for x in doc["findings"]]
    assert lost == sorted(lost, reverse=True)


def test_text_report_order_and_html_is_offline(tmp_path):
    report = analyze(_trace(tmp_path))
    text = render_text(report)
    assert text.index("step time") < text.index("== findings") < text.index("fix:") < text.index("== tables")
    html = render_html(report)
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 3
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        ElementTree.fromstring(svg)  # well-formed: browsers render inline SVG only when it parses
    assert "<script" not in html and "src=" not in html and "https://" not in html and "<link" not in html


# ---- CLI ---------------------------------------------------------------------------------------------------
def test_cli_text_json_html(tmp_path):
    path = _trace(tmp_path)
    rc, out, err = _cli(str(path))
    assert rc == 0 and "== findings" in out and err == ""
    html = tmp_path / "r.html"
    rc, out, _ = _cli(str(path), "--json", "--html", str(html), "--rules", "low-gpu-util,sync-calls")
    doc = json.loads(out)
    assert rc == 0 and {f["rule"] for f in doc["findings"]} <= {"low-gpu-util", "sync-calls"}
    assert "<svg" in html.read_text()
    rc, out, _ = _cli(
        str(path),
        *("--threshold", "low-gpu-util.min_util=0.01", "--threshold", "low-gpu-util.min_low_chunks=31"),
        *("--rules", "low-gpu-util"),
    )
    assert rc == 0 and "no antipattern found" in out


@pytest.mark.parametrize(
    ("content", "expect"),
    [(None, "no such file"), (b"hello, not json", "not JSON"), (b"", "empty")],
)
def test_cli_bad_input_is_one_line(tmp_path, content, expect):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    rc, out, err = _cli(str(path))
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and expect in err and "Traceback" not in err


def test_shares_name_the_span_they_divide_by(tmp_path):
    """With steps every share is of the window; without, the GPU-time rules divide by the GPU span and say so."""
    for steps, basis in ((True, None), (False, "GPU span")):
        b = TraceBuilder()
        if steps:
            for i in range(3):
                b.step(i, i * 20_000.0, 20_000.0)
        b.cpu("aten::to", 0.0, 60_000.0)  # the trace span is longer than the GPU span
        for i in range(20):
            b.launch("small_kernel", 1000.0 + i * 2000.0, 1005.0 + i * 2000.0, 100.0)
        path = b.write(tmp_path / f"t{steps}.json")
        rc, out, _ = _cli(str(path), "--json", "--rules", "low-gpu-util")
        (finding,) = json.loads(out)["findings"]
        assert rc == 0 and finding["evidence"]["share_of"] == basis
        rc, out, _ = _cli(str(path), "--rules", "low-gpu-util")
        assert f"% of {basis or 'window'})" in out


def test_cli_refuses_to_write_the_html_report_over_an_input_trace(tmp_path):
    path = _trace(tmp_path, "rank-0.json")
    before = path.read_bytes()
    for argv in ([str(path)], [str(tmp_path)]):  # the file itself, or a trace in a folder given
        rc, out, err = _cli(*argv, "--html", str(path))
        assert rc == 1 and out == "" and err.count("\n") == 1 and "refusing to overwrite" in err
        assert path.read_bytes() == before
    rc, _, _ = _cli(str(path), "--html", str(tmp_path / "report.html"))  # anything else is fine
    assert rc == 0


def test_cli_bad_threshold_and_rule(tmp_path):
    path = _trace(tmp_path)
    rc, _, err = _cli(str(path), "--threshold", "low-gpu-util.bogus=1")
    assert rc == 1 and "unknown key 'bogus'" in err and err.count("\n") == 1
    rc, _, err = _cli(str(path), "--rules", "bogus")
    assert rc == 1 and "unknown rule 'bogus'" in err


def test_one_bad_rank_in_a_folder(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    _trace(folder, "rank-0.json")
    with gzip.open(folder / "rank-1.json.gz", "wb") as fh:
        fh.write(b'{"traceEvents": [{"ph": "X", "na')  # truncated
    report = analyze(folder)
    assert [r.rank for r in report.ranks] == [0]
    assert len(report.errors) == 1 and "rank-1.json.gz" in report.errors[0].path
    rc, out, err = _cli(str(folder))
    assert rc == 0 and "skipped" in err and "rank-1.json.gz" in err and "== findings" in out


def test_analyze_accepts_one_rule_id_as_a_string(tmp_path):
    report = analyze(_trace(tmp_path), rules="sync-calls,dataloader")
    assert {o.rule_id for o in report.rules} == {"sync-calls", "dataloader"}


def test_analyze_raises_when_nothing_loads(tmp_path):
    with pytest.raises(AnalysisError, match="no such file"):
        analyze(tmp_path / "missing.json")


def test_python_m_entry_point(tmp_path):
    path = _trace(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "dyno.trace_analysis", str(path), "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["schema"] == SCHEMA
    proc = subprocess.run([sys.executable, "-m", "dyno.trace_analysis", "--list-rules"], capture_output=True, text=True)
    assert proc.returncode == 0 and "straggler" in proc.stdout
