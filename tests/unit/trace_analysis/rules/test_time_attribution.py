"""Time lost that a performance engineer would accept: what each rule attributes, and how reports say it.

short-kernels counts no launch time as lost on a GPU-bound trace (the host runs ahead there), sync-calls does not
count GPU idle that the host's pace set, examples give offsets beside epoch timestamps, and a deliberate zero is
not "not measurable"."""

from __future__ import annotations

import json

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json, render_text
from dyno.trace_analysis.report.phrases import cost_text, example_at, fmt_offset
from dyno.trace_analysis.rules import Severity
from dyno.trace_analysis.rules._common import GpuBound
from dyno.trace_analysis.rules.base import Evidence, Example, Finding
from dyno.trace_analysis.rules.engine import with_offsets
from dyno.trace_analysis.rules.sync import SYNC_COST_BASIS

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

SHARED = SHARED_TRACES
if not SHARED.is_dir():
    pytest.skip(f"shared GPU traces not found at {SHARED}", allow_module_level=True)


def _one(tmp_path, b: TraceBuilder, rule: str) -> Finding:
    (f,) = analyze(b.write(tmp_path / f"{rule}.json"), rules=[rule]).findings_of(rule)
    return f


# ---- short-kernels / slow-runtime-calls: one GPU-bound judgement ------------------------------------------------


def _gpu_bound_with_short_kernels() -> TraceBuilder:
    """Back-to-back 1 ms kernels queued well ahead (GPU ~100% busy), each followed by a 2 µs kernel whose launch
    call takes 10 µs, and a slow (200 µs) launch call every 10th iteration (blocking on the full queue)."""
    b = TraceBuilder()
    t = 0.0
    for i in range(40):
        b.launch("big_kernel", i * 20.0, t, 1000.0, dur=200.0 if i % 10 == 0 else 5.0)
        b.launch("tiny_kernel", i * 20.0 + 8.0, t + 1000.0, 2.0, dur=10.0)
        t += 1005.0  # a 3 µs gap: 99.7% busy (a threshold of 1.0 is then not met)
    return b


def test_short_kernels_lose_no_time_when_gpu_bound(tmp_path):
    f = _one(tmp_path, _gpu_bound_with_short_kernels(), "short-kernels")
    assert f.severity is Severity.INFO  # 50% of launches: medium floor, capped as slow-runtime-calls is
    assert f.evidence.time_lost_us == 0.0 and f.evidence.share is None
    assert f.evidence.counts["launch_host_us"] == pytest.approx(40 * 10.0)  # the host time stays in the counts
    assert "GPU-bound" in f.title and f.evidence.no_time_lost_reason.startswith("GPU busy 100% (GPU-bound)")
    text = render_text(analyze(_gpu_bound_with_short_kernels().write(tmp_path / "t.json"), rules=["short-kernels"]))
    assert "no time lost (GPU busy 100% (GPU-bound): " in text and "not measurable" not in text


def test_short_kernels_lose_launch_time_when_the_gpu_waits(tmp_path):
    b = TraceBuilder()
    for i in range(50):  # 4 µs kernels, each launched by a 5 µs call after the previous one ended: host-bound
        b.launch("tiny_kernel", i * 100.0, i * 100.0 + 7.0, 4.0)
    f = _one(tmp_path, b, "short-kernels")
    assert f.evidence.time_lost_us == pytest.approx(50 * 5.0) == f.evidence.counts["launch_host_us"]
    assert f.evidence.no_time_lost_reason is None and "GPU-bound" not in f.title
    assert f.severity is not Severity.INFO


def test_launch_rules_share_one_gpu_bound_judgement(tmp_path):
    report = analyze(
        _gpu_bound_with_short_kernels().write(tmp_path / "t.json"), rules=["short-kernels", "slow-runtime-calls"]
    )
    (short,) = report.findings_of("short-kernels")
    (slow,) = report.findings_of("slow-runtime-calls")
    for f in (short, slow):
        assert f.severity is Severity.INFO and f.evidence.time_lost_us == 0.0
        assert f.evidence.no_time_lost_reason.startswith("GPU busy 100% (GPU-bound): ")
    # the threshold is each rule's own: a stricter one makes short-kernels count its launch time again
    strict = analyze(tmp_path / "t.json", rules=["short-kernels"], thresholds={"short-kernels.gpu_bound_util": 1.0})
    (f,) = strict.findings_of("short-kernels")
    assert f.evidence.time_lost_us == pytest.approx(400.0) and f.severity is not Severity.INFO


def test_gpu_bound_value():
    bound, free = GpuBound(0.95, 0.9), GpuBound(0.5, 0.9)
    assert bound.bound and bound.host_cost(12.0) == 0.0 and bound.cap is Severity.INFO
    assert not free.bound and free.host_cost(12.0) == 12.0 and free.cap is Severity.HIGH
    assert bound.no_loss_reason("why") == "GPU busy 95% (GPU-bound): why" and free.no_loss_reason("why") is None


# ---- sync-calls: the GPU idle the syncs cause ---------------------------------------------------------------------


def test_sync_on_a_host_bound_trace_costs_its_blocked_time_not_the_host_pace(tmp_path):
    b = TraceBuilder()
    b.launch("k", 0.0, 10.0, 20.0)
    b.runtime("cudaDeviceSynchronize", 100.0, 50.0)
    b.launch("k", 100_000.0, 100_010.0, 20.0)  # the host works 100 ms before launching again
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == pytest.approx(50.0)  # removing the sync brings that launch 50 µs earlier
    assert f.evidence.counts["gpu_idle_after_sync_us"] == pytest.approx(100_010.0 - 150.0)  # kept, as a count
    assert f.evidence.time_lost_basis == SYNC_COST_BASIS
    assert "GPU idle 50 µs caused by them (of 99.9 ms idle after them)" in f.title


def test_sync_on_a_gpu_bound_trace_costs_the_drain_to_relaunch_bubble(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 50)  # 5 ms of queued kernels
    b.runtime("cudaStreamSynchronize", 1_000.0, 4_005.0)  # waits for the queue to drain (5000)
    b.launch("next", 5_010.0, 5_020.0, 100.0)
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == pytest.approx(5_020.0 - 5_000.0)  # not the 4 ms the host waited


def test_sync_does_not_own_idle_inside_work_queued_before_it(tmp_path):
    # the GPU idles 2 ms between two kernels queued before the sync (a cross-stream wait): not the sync's doing
    b = TraceBuilder()
    b.launch("a", 0.0, 0.0, 1_000.0)
    b.launch("b", 10.0, 3_000.0, 1_000.0)
    b.runtime("cudaDeviceSynchronize", 100.0, 3_905.0)  # returns at 4005
    b.launch("next", 4_006.0, 4_010.0, 10.0)
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == pytest.approx(10.0)


def test_syncs_in_one_gap_and_nested_syncs(tmp_path):
    b = TraceBuilder()
    b.launch("k", 0.0, 10.0, 20.0)
    b.runtime("cudaStreamSynchronize", 1_000.0, 10.0)
    b.cpu("aten::item", 2_000.0, 100.0)  # encloses its copy and sync: 100 µs blocked, once
    b.runtime("cudaMemcpyAsync", 2_005.0, 10.0)
    b.runtime("cudaStreamSynchronize", 2_020.0, 70.0)
    b.launch("k", 50_000.0, 50_010.0, 20.0)
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == pytest.approx(10.0 + 100.0)
    assert f.evidence.counts["host_blocked_us"] == pytest.approx(110.0)


def test_sync_returning_while_the_gpu_runs_costs_nothing_and_says_why(tmp_path):
    b = TraceBuilder()
    b.launch("long_other_stream", 0.0, 0.0, 10_000.0, stream=8)
    b.runtime("cudaStreamSynchronize", 1_000.0, 50.0)
    b.launch("k", 1_060.0, 1_070.0, 20.0)
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == 0.0 and "no GPU idle caused by them" in f.title
    assert f.evidence.no_time_lost_reason == "the GPU was not idle between the syncs and the next GPU work"


def test_sync_cost_on_a_cpu_trace_is_host_time_without_a_gpu_definition(tmp_path):
    b = TraceBuilder(capability=None)
    b.cpu("aten::item", 100.0, 10.0)
    f = _one(tmp_path, b, "sync-calls")
    assert f.evidence.time_lost_us == pytest.approx(10.0) and f.evidence.time_lost_basis is None


# ---- example offsets and the cost line --------------------------------------------------------------------------


def _offset_trace() -> TraceBuilder:
    b = TraceBuilder()
    b.cpu("start_of_trace", 1_000_000.0, 1.0)
    for i in range(20):
        b.launch("tiny_kernel", 2_000_000.0 + 100.0 * i, 2_000_010.0 + 100.0 * i, 2.0)
    return b


def test_examples_carry_their_offset_from_the_trace_start(tmp_path):
    report = analyze(_offset_trace().write(tmp_path / "t.json"), rules=["short-kernels"])
    (f,) = report.findings_of("short-kernels")
    ex = f.evidence.examples[0]
    assert ex.ts_us == 2_000_010.0 and ex.offset_us == pytest.approx(1_000_010.0)
    assert "e.g. tiny_kernel at +1.000 s (ts=2000010) dur 2.0 µs" in render_text(report)
    assert "<code>tiny_kernel</code> at +1.000 s (ts=2000010), 2.0 µs" in render_html(report)
    doc = json.loads(render_json(report))
    (jex, *_) = doc["findings"][0]["evidence"]["examples"]
    assert jex["ts_us"] == 2_000_010.0 and jex["offset_us"] == pytest.approx(1_000_010.0)


def test_with_offsets_keeps_an_offset_a_rule_set():
    placed = Example("a", 50.0, 1.0, offset_us=7.0)
    f = Finding("r", Severity.LOW, "t", Evidence(examples=(placed, Example("b", 30.0, 1.0))), "fix")
    got = with_offsets(f, 10.0).evidence.examples
    assert [e.offset_us for e in got] == [7.0, 20.0]
    assert example_at(Example("c", 1_694_039_994_139_319.0, 1.0)) == "ts=1694039994139319"  # no offset known


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (1_234_567.0, "+1.235 s"),
        (12_345.6, "+12.346 ms"),
        (850.0, "+850 µs"),
        (0.4, "+0.4 µs"),
        (-2_500.0, "-2.500 ms"),
    ],
)
def test_fmt_offset(us, text):
    assert fmt_offset(us) == text


def test_cost_text_tells_none_from_not_measurable():
    assert cost_text(Evidence(time_lost_us=1500.0)) == "lost 1.5 ms"
    assert cost_text(Evidence(no_time_lost_reason="GPU-bound")) == "no time lost (GPU-bound)"
    assert cost_text(Evidence()) == "time lost not measurable"
    assert Evidence(no_time_lost_reason="x").measurable and not Evidence().measurable


# ---- on the shared traces -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared():
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = analyze(SHARED / name, rules=["short-kernels", "sync-calls", "slow-runtime-calls"])
        return cache[name]

    return get


def test_shared_gpu_bound_control_short_kernels_cost_nothing(shared):
    (f,) = shared("ns_resolution_trace").findings_of("short-kernels")
    assert f.severity is Severity.INFO and f.evidence.time_lost_us == 0.0
    assert f.evidence.counts["launch_host_us"] > 5_000  # 9.3 ms of launch time, shown but not lost


def test_shared_host_bound_short_kernels_still_cost(shared):
    (f,) = shared("negative_queue_length_values_check").findings_of("short-kernels")
    assert f.evidence.time_lost_us == f.evidence.counts["launch_host_us"] > 0


@pytest.mark.parametrize("name", ["alexnet", "simple_add"])
def test_shared_micro_benchmark_syncs_cost_at_most_their_blocked_time(shared, name):
    (f,) = shared(name).findings_of("sync-calls")
    c = f.evidence.counts
    # simple_add: 2.43 s of GPU idle after its syncs, 713 µs blocked; the syncs cost at most the latter
    assert 0 < f.evidence.time_lost_us <= c["host_blocked_us"] < c["gpu_idle_after_sync_us"]
    assert f.severity is Severity.LOW


def test_shared_examples_have_offsets_within_the_trace(shared):
    r = shared("negative_queue_length_values_check")
    span = r.ranks[0].span_us
    for f in r.findings:
        for ex in f.evidence.examples:
            assert ex.offset_us is not None and 0 <= ex.offset_us <= span
