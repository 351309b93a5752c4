"""Rules on REAL torch.profiler CPU traces (generated once per session, a few seconds: conftest's cpu_traces)."""

from __future__ import annotations

import pytest

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import Severity

pytestmark = [pytest.mark.unit, pytest.mark.torch]


@pytest.fixture(scope="session")
def bad_report(cpu_traces):
    return analyze(cpu_traces["bad"])


@pytest.fixture(scope="session")
def good_report(cpu_traces):
    return analyze(cpu_traces["good"])


def test_dataloader_without_workers_is_found(bad_report):
    (f,) = bad_report.findings_of("dataloader")
    # 4 samples x 2 ms of sleep per batch against a tiny model: well above the 5% threshold on any machine
    assert f.severity.rank >= Severity.MEDIUM.rank and f.evidence.share > 0.05
    assert "DataLoader" in f.evidence.examples[0].name
    assert "num_workers" in f.fix


def test_item_every_step_is_a_sync_call(bad_report, good_report):
    (f,) = bad_report.findings_of("sync-calls")
    assert f.evidence.counts["item_calls"] >= 3
    assert f.severity is Severity.INFO  # CPU-only: .item() does not wait for a device here
    assert good_report.findings_of("sync-calls") == []


def test_single_tensor_optimizer_and_zero_grad(bad_report, good_report):
    titles = [f.title for f in bad_report.findings_of("optimizer")]
    assert any("single-tensor" in t for t in titles)
    assert any("zero_grad writes zeros" in t for t in titles)
    assert good_report.findings_of("optimizer") == []  # foreach=True, set_to_none=True


def test_cpu_init_copy(bad_report, good_report):
    (f,) = bad_report.findings_of("cpu-init-copy")
    assert f.evidence.counts["copies"] >= 3 and f.evidence.examples[0].name == "aten::to"
    assert good_report.findings_of("cpu-init-copy") == []


def test_cpu_only_trace_summary_and_gpu_rules(bad_report):
    (rank,) = bad_report.ranks
    assert not rank.has_gpu and rank.breakdown is None
    assert rank.steps is not None and rank.steps.count == 5
    assert rank.top_cpu_ops
    gpu_skips = [o for o in bad_report.rules if o.reason == "not applicable (no GPU activity)"]
    assert {o.rule_id for o in gpu_skips} >= {"low-gpu-util", "short-kernels", "exposed-comm"}
