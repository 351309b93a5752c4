"""Rule selection edge cases: excluding every rule, and the documented ``--rules`` exclusion syntax."""

from __future__ import annotations

import argparse
import io

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.cli import add_analyze_arguments, run_analyze
from dyno.trace_analysis.rules import ALL_RULES

pytestmark = pytest.mark.unit


def _trace(tmp_path):
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 2000.0, 2000.0)
    b.launch("small_kernel", 0.0, 6.0, 4.0)
    b.runtime("cudaStreamSynchronize", 2500.0, 40.0)
    return b.write(tmp_path / "t.json")


def test_excluding_every_rule_runs_none(tmp_path):
    # select_rules returned () but analyze_traces read the empty selection as "all rules"
    report = analyze(_trace(tmp_path), rules=["-" + r.id for r in ALL_RULES])
    assert report.rules == () and report.findings == ()
    assert report.ranks and report.ranks[0].steps is not None  # the summary is still there


def test_cli_excluding_every_rule(tmp_path):
    parser = add_analyze_arguments(argparse.ArgumentParser())
    out, err = io.StringIO(), io.StringIO()
    every = ",".join("-" + r.id for r in ALL_RULES)
    rc = run_analyze(parser.parse_args([str(_trace(tmp_path)), f"--rules={every}"]), out=out, err=err)
    assert rc == 0 and "== findings (0)" in out.getvalue()


def test_exclusion_syntax_in_help_parses(monkeypatch):
    # the docs showed `--rules -straggler`, which argparse rejects ("expected one argument": a word starting
    # with "-" is taken for an option); the help must show a form that parses
    monkeypatch.setenv("COLUMNS", "400")  # no line wrap inside the example (argparse breaks lines at hyphens)
    parser = add_analyze_arguments(argparse.ArgumentParser())
    help_text = parser.format_help()
    assert "--rules=-straggler" in help_text
    args = parser.parse_args(["t.json", "--rules=-straggler"])
    assert args.rules == ["-straggler"]
    with pytest.raises(SystemExit):  # what the old example did: a usage error, exit 2
        parser.parse_args(["t.json", "--rules", "-straggler"])


def test_python_m_main_ctrl_c_is_quiet(monkeypatch, tmp_path):
    # `python -m dyno.trace_analysis` exits 130 quietly on Ctrl-C during a long load, as `dyno-cli analyze` does
    # (the shell convention), with no KeyboardInterrupt traceback
    from dyno.trace_analysis import cli

    def interrupted(args, out=None, err=None, prog=""):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_analyze", interrupted)
    assert cli.main([str(_trace(tmp_path))]) == 130
