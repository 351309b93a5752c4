"""Required outcomes on the real A100/V100 traces of ../shared/traces/gpu (HTA's test data)."""

from __future__ import annotations

import pytest

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json, render_text
from dyno.trace_analysis.rules import Severity

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

SHARED = SHARED_TRACES
if not SHARED.is_dir():
    pytest.skip(f"shared GPU traces not found at {SHARED}", allow_module_level=True)


def _ids(report) -> set[str]:
    return {f.rule_id for f in report.findings}


@pytest.fixture(scope="module")
def reports():
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = analyze(SHARED / name)
        return cache[name]

    return get


def test_negative_queue_length(reports):
    r = reports("negative_queue_length_values_check")
    assert {"sync-calls", "pageable-memcpy", "short-kernels"} <= _ids(r)
    (sync,) = r.findings_of("sync-calls")
    # its real syncs and .cpu() copies; its 945 .item() calls read CPU int tensors (none calls the CUDA runtime,
    # 935 run on one side thread): not device syncs
    counts = sync.evidence.counts
    assert counts["sync_runtime_calls"] >= 60 and counts["blocking_dtoh_copies"] >= 20
    assert counts["item_calls"] == 0 and counts["cpu_item_calls"] > 500
    (pm,) = r.findings_of("pageable-memcpy")
    assert pm.evidence.counts["copies"] == 75


@pytest.mark.parametrize("name", ["alexnet", "simple_add"])
def test_micro_benchmarks_are_gpu_starved(reports, name):
    r = reports(name)
    assert {"low-gpu-util", "gpu-starvation"} & _ids(r)
    assert "sync-calls" in _ids(r)
    (low,) = r.findings_of("low-gpu-util")
    assert low.severity is Severity.HIGH and low.evidence.counts["utilization"] < 0.01


def test_gpu_bound_control_has_no_high_finding(reports):
    r = reports("ns_resolution_trace")
    assert [f for f in r.findings if f.severity is Severity.HIGH] == []
    assert "low-gpu-util" not in _ids(r)
    assert r.ranks[0].breakdown.share(r.ranks[0].breakdown.idle_us) < 0.05


def test_two_rank_folder_runs_cross_rank(reports):
    r = reports("trace_filter")
    assert [s.rank for s in r.ranks] == [0, 1]
    (straggler,) = [o for o in r.rules if o.rule_id == "straggler"]
    assert straggler.status in ("clean", "findings") and "2 ranks" in straggler.reason
    assert {f.rank for f in r.findings} == {0, 1}


def test_renderers_on_a_real_trace(reports, tmp_path):
    r = reports("nccl_parser_config")
    text = render_text(r)
    assert text.index("rank 0") < text.index("== findings") < text.index("== tables")
    doc = render_json(r)
    assert '"schema": "dyno.trace_analysis.report"' in doc and '"version": 2' in doc
    html = render_html(r)
    assert html.count("<svg") == 3 and "<script" not in html and "http" not in html.lower().replace("http-equiv", "")


@pytest.mark.parametrize(
    "name", ["negative_queue_length_values_check", "ns_resolution_trace", "nccl_parser_config", "trace_filter"]
)
def test_shares_are_of_the_steps_window(reports, name):
    # traces with profiler steps: every rule counts inside the steps window and divides by it, the GPU-side rules
    # too (not HTA's GPU scope, which ends at the last step's start: trace_filter's exposed-comm holds 337 ms, 27.4%)
    r = reports(name)
    window = {s.rank: s.window_us for s in r.ranks}
    assert all("profiler steps" in s.window_kind for s in r.ranks)
    for f in r.findings:
        if f.evidence.share is not None and f.rank is not None:
            assert f.evidence.share == pytest.approx(f.evidence.time_lost_us / window[f.rank]), (f.rule_id, f.title)
    if name == "trace_filter":
        for f in r.findings_of("exposed-comm"):
            assert f.severity is Severity.HIGH and 0.2 <= f.evidence.share <= 1.0


def test_exposed_comm_counts_the_nccl_kernels_low_gpu_util_counts(reports):
    # negative_queue: 5 NCCL kernels (25.0 ms in the steps) were launched before the trace's CPU events begin (no
    # runtime row); low-gpu-util counts them as GPU time, so exposed-comm counts them too: 75 kernels, 164.4 ms of
    # communication, 162.0 ms (15.1% of the steps) not under compute
    r = reports("negative_queue_length_values_check")
    (f,) = r.findings_of("exposed-comm")
    assert f.evidence.counts["kernels"] == 75
    assert f.evidence.counts["comm_us"] == pytest.approx(164407.0)
    assert f.evidence.time_lost_us == pytest.approx(162033.0)
    assert "15.1% of the 5 profiler steps" in f.title
