"""Threshold overrides that used to escape validation: infinite values and non-string names."""

from __future__ import annotations

import argparse
import io

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis.cli import add_analyze_arguments, run_analyze
from dyno.trace_analysis.rules import ALL_RULES, ThresholdError, resolve_thresholds

pytestmark = pytest.mark.unit

DEFAULTS = {r.id: r.thresholds for r in ALL_RULES}


@pytest.mark.parametrize(
    "override",
    [
        {"low-gpu-util.chunks": "inf"},  # int threshold: int(inf) raised OverflowError
        {"low-gpu-util.chunks": "1e400"},  # overflows to inf when parsed
        {"low-gpu-util.chunks": float("inf")},
        {"dataloader.max_share": "inf"},  # float threshold: accepted, then written as null in the JSON report
        {"dataloader.max_share": float("-inf")},
    ],
)
def test_infinite_threshold_is_a_threshold_error(override):
    with pytest.raises(ThresholdError, match="finite"):
        resolve_thresholds(DEFAULTS, override)


def test_cli_infinite_int_threshold_is_one_line(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    path = b.write(tmp_path / "t.json")
    parser = add_analyze_arguments(argparse.ArgumentParser())
    out, err = io.StringIO(), io.StringIO()
    rc = run_analyze(parser.parse_args([str(path), "--threshold", "low-gpu-util.chunks=inf"]), out=out, err=err)
    assert rc == 1 and out.getvalue() == ""
    assert err.getvalue().count("\n") == 1 and "low-gpu-util.chunks" in err.getvalue()


def test_non_string_threshold_name_is_a_threshold_error():
    # analyze(thresholds={5: 1}) raised AttributeError ('int' object has no attribute 'rpartition')
    with pytest.raises(ThresholdError, match="expected RULE.KEY"):
        resolve_thresholds(DEFAULTS, {5: 1})


def test_errors_analyze_raises_import_from_the_package(tmp_path):
    # the docs say analyze() raises ThresholdError / UnknownRuleError; the package only exported AnalysisError
    import dyno.trace_analysis as ta

    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    path = b.write(tmp_path / "t.json")
    with pytest.raises(ta.ThresholdError):
        ta.analyze(path, thresholds={"low-gpu-util.nope": 1})
    with pytest.raises(ta.UnknownRuleError):
        ta.analyze(path, rules=["nope"])
    assert {"ThresholdError", "UnknownRuleError", "Report"} <= set(ta.__all__)
