"""Readable figures in finding titles and reports, and no-tensor-cores without deviceProperties: durations in the unit
that reads best, sizes below 1 MiB in KiB, launch-queue examples with their delay, sync-calls naming both costs,
long kernel names cut with a mark, and no-tensor-cores on traces whose kernel names say the architecture."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_text
from dyno.trace_analysis.units import clip_name, fmt_bytes, fmt_count, fmt_ts, fmt_us

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (15_320, "15.0 KiB"), (233.1 * 2**20, "233.1 MiB"), (1.5 * 2**30, "1.50 GiB")],
)
def test_fmt_bytes(n, text):
    assert fmt_bytes(n) == text


def test_fmt_ts_drops_the_decimals_of_whole_microseconds():
    assert fmt_ts(1694039994139319.0) == "1694039994139319"
    assert fmt_ts(1712195495578460.25) == "1712195495578460.250"  # ns-resolution traces keep theirs
    assert fmt_ts(float("nan")) == "nan"


def test_clip_name_marks_a_cut_and_leaves_short_names_alone():
    assert clip_name("aten::add", 80) == "aten::add"
    assert clip_name("x" * 80, 80) == "x" * 80
    cut = clip_name("void at::native::vectorized_elementwise_kernel<4, float>(int)", 20)
    assert len(cut) == 20 and cut.endswith("…") and cut.startswith("void at::native::ve")


def test_fmt_us_is_still_exported_by_the_text_report():
    from dyno.trace_analysis.report.text import fmt_us as text_fmt_us

    assert text_fmt_us is fmt_us


def _report(tmp_path, b, rules=None):
    return analyze(b.write(tmp_path / "t.json"), rules=rules)


def test_long_gaps_and_calls_are_in_seconds(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    # a 1.5 s launch call, then a 2 s GPU gap; of a kernel launched before: a first launch that long is CUDA
    # start-up (lazy module loading), which the title would name (tests/unit/trace_analysis/rules/test_startup.py)
    b.launch("compute_kernel", 600.0, 2_000_600.0, 100.0, dur=1_500_000.0)
    report = _report(tmp_path, b, rules=["gpu-starvation", "slow-runtime-calls"])
    (starve,) = report.findings_of("gpu-starvation")
    assert starve.title == "GPU 0 idle 1 time for more than 500.0 ms (longest 2.00 s)"
    (slow,) = report.findings_of("slow-runtime-calls")
    assert slow.title.startswith("1 launch/copy runtime call took over 50 µs (max 1.50 s)")


def test_short_gaps_keep_small_units(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    b.launch("k", 600.0, 501_100.0, 100.0, dur=80.0)  # a 500.6 ms gap, an 80 µs call
    report = _report(tmp_path, b, rules=["gpu-starvation", "slow-runtime-calls"])
    (starve,) = report.findings_of("gpu-starvation")
    assert "(longest 500.6 ms)" in starve.title
    (slow,) = report.findings_of("slow-runtime-calls")
    assert "(max 80 µs)" in slow.title


def test_small_pageable_copies_say_kib_not_zero_mib(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    for i in range(3):
        b.memcpy("Memcpy HtoD (Pageable -> Device)", 600.0 + 20 * i, 700.0 + 20 * i, 4.0, nbytes=5120)
    (f,) = _report(tmp_path, b, rules=["pageable-memcpy"]).findings_of("pageable-memcpy")
    assert "(15.0 KiB, 12 µs of GPU time)" in f.title and "MiB" not in f.title


def test_launch_queue_title_gives_the_delays(tmp_path):
    b = TraceBuilder()
    for i in range(10):  # launched 1 µs apart, each run 1 ms after the last: delays 1000, 1999, ..., 9991 µs
        b.launch("late_kernel", float(i), 1000.0 * (i + 1), 5.0)
    (f,) = _report(tmp_path, b, rules=["launch-queue"]).findings_of("launch-queue")
    assert "(median delay 5.5 ms, longest 10.0 ms)" in f.title, f.title


def test_sync_calls_title_names_both_costs(tmp_path):
    b = TraceBuilder()
    b.step(0, 0.0, 10_000.0)
    b.busy_gpu(0.0, 2)
    b.runtime("cudaStreamSynchronize", 2_000.0, 50.0)
    b.launch("k", 3_000.0, 3_010.0, 5.0)  # the GPU idles from the sync's return (2050) to 3010
    (f,) = _report(tmp_path, b, rules=["sync-calls"]).findings_of("sync-calls")
    # the host's 950 µs after the sync are its own pace: the sync delayed the next launch by its 50 µs only
    assert f.title == (
        "1 CUDA synchronize call in the 1 profiler step: host blocked 50 µs, GPU idle 50 µs caused by them "
        "(of 960 µs idle after them)"
    )
    assert f.evidence.time_lost_us == pytest.approx(50.0)


def test_sync_calls_on_a_cpu_trace_has_no_gpu_cost(tmp_path):
    b = TraceBuilder(capability=None)
    b.cpu("aten::item", 100.0, 10.0)
    (f,) = _report(tmp_path, b, rules=["sync-calls"]).findings_of("sync-calls")
    assert "host blocked" not in f.title and "GPU" not in f.title


def test_long_names_are_cut_with_a_mark_in_text_and_html(tmp_path):
    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >"
    )
    b = TraceBuilder()
    for i in range(20):  # short kernels: short-kernels finds them, with this name in its examples
        b.launch(long, 100.0 * i, 100.0 * i + 10.0, 2.0)
    report = _report(tmp_path, b)
    text = render_text(report)
    cut = long[:79] + "…"
    assert f"e.g. {cut} at +10 µs (ts=10) dur 2.0 µs" in text  # the trace starts at the first launch call, ts=0
    assert f"{cut}\n" in text  # the kernel table
    assert long not in text
    html = render_html(report)
    assert "&lt;char*, 1&gt; &gt;</code>" in html  # 113 characters: under the HTML limit, whole


def _gemm_only(tmp_path, *kernels):
    b = TraceBuilder(capability=None)  # no deviceProperties
    t = 0.0
    for k in kernels:
        t = b.busy_gpu(t, 5, name=k)
    return analyze(b.write(tmp_path / "t.json"), rules=["no-tensor-cores"])


def _outcome(report, rule_id):
    (o,) = [o for o in report.rules if o.rule_id == rule_id]
    return o


def test_no_tensor_cores_reads_the_architecture_from_kernel_names(tmp_path):
    report = _gemm_only(tmp_path, "ampere_sgemm_128x64_nn")
    (f,) = report.findings_of("no-tensor-cores")
    assert "compute-capability ≥8.0 GPU (from kernel names: no deviceProperties in the trace)" in f.title


def test_no_tensor_cores_takes_the_highest_architecture_tag(tmp_path):
    report = _gemm_only(tmp_path, "volta_sgemm_128x64_nn", "sm90_xmma_fprop_foo_tf32")
    assert _outcome(report, "no-tensor-cores").status == "clean"  # runs: sm90 has tensor cores, and one uses them
    report = _gemm_only(tmp_path, "volta_sgemm_128x64_nn", "sm_86_sgemm_foo")
    (f,) = report.findings_of("no-tensor-cores")
    assert "≥8.6" in f.title


def test_no_tensor_cores_runs_clean_on_tensor_core_kernels_without_device_properties(tmp_path):
    report = _gemm_only(tmp_path, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>")
    assert _outcome(report, "no-tensor-cores").status == "clean"


def test_no_tensor_cores_still_skips_without_any_architecture(tmp_path):
    report = _gemm_only(tmp_path, "my_sgemm_kernel", "Xsm80_not_a_tag")
    o = _outcome(report, "no-tensor-cores")
    assert o.status == "skipped" and "no architecture in the kernel names" in o.reason


def test_no_tensor_cores_runs_without_capability_when_there_is_nothing_to_judge(tmp_path):
    report = _gemm_only(tmp_path, "vectorized_elementwise_kernel")  # no GEMM at all
    assert _outcome(report, "no-tensor-cores").status == "clean"
    report = _gemm_only(tmp_path, "my_gemm_s16816_kernel")  # a tensor-core GEMM, no architecture tag
    assert _outcome(report, "no-tensor-cores").status == "clean"


def test_unaligned_gemm_asks_for_shapes_only_when_there_are_matmuls(tmp_path):
    b = TraceBuilder(capability=None)  # CPU-only, no record_shapes
    b.cpu("aten::add", 10.0, 5.0)
    report = analyze(b.write(tmp_path / "plain.json"), rules=["unaligned-gemm"])
    assert _outcome(report, "unaligned-gemm").status == "clean"
    b.cpu("aten::linear", 20.0, 5.0)
    report = analyze(b.write(tmp_path / "mm.json"), rules=["unaligned-gemm"])
    o = _outcome(report, "unaligned-gemm")
    assert o.status == "skipped" and "record_shapes=True" in (o.enable_with or "")


def test_device_properties_win_over_kernel_names(tmp_path):
    b = TraceBuilder(capability=(7, 0))
    b.busy_gpu(0.0, 5, name="ampere_sgemm_128x64_nn")
    (f,) = analyze(b.write(tmp_path / "t.json"), rules=["no-tensor-cores"]).findings_of("no-tensor-cores")
    assert "compute-capability 7.0 GPU" in f.title and "kernel names" not in f.title


def test_shared_trace_without_device_properties_runs_no_tensor_cores():
    root = Path(__file__).resolve().parents[4]
    # <repo root>/../shared (a git worktree under /work/wt/<name>: one level further up), as the shared-trace tests
    found = [c for c in (root.parent / "shared", root.parent.parent / "shared") if c.is_dir()]
    folder = found[0] / "traces" / "gpu" / "trace_filter" if found else root
    if not folder.is_dir() or not found:
        pytest.skip("shared GPU traces not available")
    report = analyze([folder], rules=["no-tensor-cores"])
    assert {o.status for o in report.rules if o.rule_id == "no-tensor-cores"} == {"clean"}


def test_html_utilization_timeline_has_its_scale(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 20)
    html = render_html(_report(tmp_path, b))
    timeline = html[html.index('aria-label="GPU utilization"') :]
    timeline = timeline[: timeline.index("</svg>")]
    assert ">100%</text>" in timeline and ">0%</text>" in timeline and ">over 2.0 ms</text>" in timeline
    cpu = TraceBuilder(capability=None)
    cpu.cpu("aten::add", 0.0, 5.0)
    html = render_html(analyze(cpu.write(tmp_path / "cpu.json")))
    assert 'aria-label="GPU utilization"' not in html and "No GPU activity: no utilization timeline." in html


def test_slow_runtime_calls_lose_no_time_when_gpu_bound(tmp_path):
    b = TraceBuilder()
    t = 0.0
    for i in range(50):  # back-to-back 1 ms kernels, each launch call blocking 200 µs on a full queue
        b.launch("big_kernel", i * 300.0, t, 1000.0, dur=200.0)
        t += 1000.0
    (f,) = _report(tmp_path, b, rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert f.severity.value == "info" and "GPU-bound" in f.title
    assert f.evidence.time_lost_us == 0.0 and f.evidence.share is None
    assert f.evidence.counts["host_time_over_limit_us"] == pytest.approx(50 * 150.0)


def test_slow_runtime_calls_lose_time_when_the_gpu_idles(tmp_path):
    b = TraceBuilder()
    for i in range(50):  # 200 µs launch calls of 10 µs kernels: the GPU idles
        b.launch("small_kernel", i * 300.0, i * 300.0 + 205.0, 10.0, dur=200.0)
    (f,) = _report(tmp_path, b, rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert "GPU-bound" not in f.title
    assert f.evidence.time_lost_us == pytest.approx(50 * 150.0) == f.evidence.counts["host_time_over_limit_us"]


def test_text_tables_say_what_the_share_is_and_when_there_is_nothing(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    text = render_text(_report(tmp_path, b))
    assert "top GPU kernels / copies by GPU time (share: of all GPU kernel/copy time)" in text
    assert "gpu%" not in text and "no GPU kernels or CPU ops" not in text
    empty = tmp_path / "instants.json"
    empty.write_text('{"traceEvents": [{"ph": "i", "name": "x", "ts": 1, "pid": 1, "tid": 1}]}')
    text = render_text(analyze(empty))
    assert text.endswith("== tables ==\nrank 0\n  no GPU kernels or CPU ops in the trace\n")


def test_text_wraps_titles_and_fixes_with_a_hanging_indent(tmp_path):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    b.launch("k", 600.0, 2_000_600.0, 100.0, dur=1_500_000.0)
    report = _report(tmp_path, b)
    lines = render_text(report).splitlines()
    assert max(len(line) for line in lines if "e.g." not in line) <= 110
    fix = next(i for i, line in enumerate(lines) if line.startswith("      fix: "))
    assert lines[fix + 1].startswith(" " * 11) and not lines[fix + 1].startswith(" " * 12)
    # the words are all there, in order: unwrapping gives the fix back
    f = report.findings[0]
    block = [lines[fix]]
    for ln in lines[fix + 1 :]:
        if not ln.startswith(" " * 11):
            break
        block.append(ln)
    assert " ".join(ln.strip() for ln in block) == f"fix: {f.fix}"
    assert all(len(line) > 110 for line in render_text(report, width=0).splitlines() if line.startswith("      fix: "))


def test_memory_pressure_gives_no_verdict_without_the_capacity(tmp_path):
    b = TraceBuilder(capability=None)  # no deviceProperties: no totalGlobalMem
    b.busy_gpu(0.0, 5)
    b.memory(10.0, 2**30)
    o = _outcome(analyze(b.write(tmp_path / "nocap.json"), rules=["memory-pressure"]), "memory-pressure")
    assert o.status == "skipped" and "capacity unknown" in o.reason
    b = TraceBuilder(total_mem=40 * 2**30)
    b.busy_gpu(0.0, 5)
    b.memory(10.0, 2**30)  # 1 of 40 GiB: judged, and fine
    assert _outcome(analyze(b.write(tmp_path / "cap.json"), rules=["memory-pressure"]), "memory-pressure").status == (
        "clean"
    )


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("window_us", 1_074_200.0, "window=1.07 s"),
        ("utilization", 0.355082, "utilization=35.5%"),
        ("share_of_launches", 0.23187, "share_of_launches=23.2%"),
        ("capacity_bytes", 40 * 2**30, "capacity=40.00 GiB"),
        ("bytes", 15_320, "bytes=15.0 KiB"),
        ("launches", 5240.0, "launches=5,240"),
        ("mean", 2.5, "mean=2.5"),
        ("median_delay_us", float("nan"), "median_delay_us=-"),
    ],
)
def test_fmt_count_uses_the_unit_of_the_key(key, value, text):
    assert fmt_count(key, value) == text


def test_html_counts_are_readable(tmp_path):
    b = TraceBuilder()
    b.step(0, 0.0, 2_000_000.0)
    b.busy_gpu(0.0, 5)
    html = render_html(_report(tmp_path, b, rules=["low-gpu-util"]))
    counts = html[html.index("<b>low-gpu-util</b>") :]
    counts = counts[counts.index("<span class=muted>") : counts.index("</span>")]
    assert "window=2.00 s" in counts and "utilization=0.0%" in counts and "e+" not in counts
