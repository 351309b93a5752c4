"""Threshold overrides are validated: infinite values and non-string names are refused."""

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


# shares (fractions 0..1): a value above 1 is refused (min_util=40 would mean 4000% and flag everything)
SHARE_KEYS = [
    ("low-gpu-util", "min_util"),
    ("host-bound", "max_host_wait_share"),
    ("launch-overhead", "min_share"),
    ("short-kernels", "min_share_of_launches"),
    ("slow-runtime-calls", "gpu_bound_util"),
    ("launch-queue", "min_outlier_share"),
    ("launch-queue", "gpu_bound_util"),
    ("dataloader", "max_share"),
    ("exposed-comm", "max_share"),
    ("no-tensor-cores", "min_gemm_share"),
    ("memory-pressure", "max_share"),
    ("straggler", "min_excess"),  # `min_excess=5` meant 5%, not 500% (which silenced the rule)
]


@pytest.mark.parametrize(("rule", "key"), SHARE_KEYS)
def test_share_above_one_is_a_threshold_error_suggesting_percent(rule, key):
    with pytest.raises(ThresholdError) as e:
        resolve_thresholds(DEFAULTS, {f"{rule}.{key}": "40"})
    assert str(e.value) == f"threshold {rule}.{key} is a share (0..1): 40 would be 4000%; did you mean 40%?"
    assert resolve_thresholds(DEFAULTS, {f"{rule}.{key}": "40%"})[rule][key] == pytest.approx(0.4)
    assert resolve_thresholds(DEFAULTS, {rule: {key: 1}})[rule][key] == 1.0  # 100% is a share


@pytest.mark.parametrize("raw", ["150%", 250.0, "1e3"])
def test_share_above_one_without_a_percent_reading(raw):
    with pytest.raises(ThresholdError, match=r"low-gpu-util.min_util is a share \(0..1\)") as e:
        resolve_thresholds(DEFAULTS, {"low-gpu-util.min_util": raw})
    assert "\n" not in str(e.value)
    if raw == "150%":  # no percent form would be valid: no suggestion
        assert "did you mean" not in str(e.value)


def test_other_thresholds_may_exceed_one():
    got = resolve_thresholds(DEFAULTS, {"straggler.mad_factor": "3", "gpu-starvation.min_gap_us": "2e6"})
    assert got["straggler"]["mad_factor"] == 3.0 and got["gpu-starvation"]["min_gap_us"] == 2e6


def test_resolved_thresholds_are_plain_numbers(tmp_path):
    import json

    from dyno.trace_analysis import analyze
    from dyno.trace_analysis.report import render_json

    got = resolve_thresholds(DEFAULTS, None)
    assert type(got["low-gpu-util"]["min_util"]) is float
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    doc = json.loads(render_json(analyze(b.write(tmp_path / "t.json"))))
    assert doc["thresholds"]["low-gpu-util"]["min_util"] == 0.5


def test_cli_share_above_one_is_one_line(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    path = b.write(tmp_path / "t.json")
    parser = add_analyze_arguments(argparse.ArgumentParser())
    out, err = io.StringIO(), io.StringIO()
    rc = run_analyze(parser.parse_args([str(path), "--threshold", "low-gpu-util.min_util=40"]), out=out, err=err)
    assert rc == 1 and out.getvalue() == ""
    assert err.getvalue().count("\n") == 1 and "did you mean 40%?" in err.getvalue()
