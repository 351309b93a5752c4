"""Every antipattern rule: a positive and a negative case on small synthetic Kineto-shaped traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import ALL_RULES, Severity

pytestmark = pytest.mark.unit


def _run(b: TraceBuilder, tmp_path: Path, rule: str, name: str = "t.json", **th: object):
    report = analyze(b.write(tmp_path / name), rules=[rule], thresholds={f"{rule}.{k}": v for k, v in th.items()})
    outcome = [o for o in report.rules if o.rule_id == rule]
    return report.findings_of(rule), outcome


def _busy(b: TraceBuilder | None = None, n: int = 200) -> TraceBuilder:
    b = b or TraceBuilder()
    b.busy_gpu(0.0, n)
    return b


def _host_bound() -> TraceBuilder:
    """Each kernel launched only after the previous one finished, with 90 µs host gaps."""
    b = TraceBuilder()
    t = 0.0
    for _ in range(100):
        b.launch("small_kernel", t, t + 6.0, 4.0, dur=5.0)
        t += 100.0
    return b


# ---- GPU utilization ---------------------------------------------------------------------------------------
def test_low_gpu_util_positive_and_negative(tmp_path):
    got, _ = _run(_host_bound(), tmp_path, "low-gpu-util")
    assert len(got) == 1 and got[0].severity is Severity.HIGH
    assert got[0].evidence.counts["utilization"] < 0.1
    assert got[0].evidence.examples and got[0].evidence.examples[0].ts_us >= 0
    got, _ = _run(_busy(), tmp_path, "low-gpu-util", "busy.json")
    assert got == []


def test_gpu_starvation_positive_and_negative(tmp_path):
    b = _busy(n=10)
    b.launch("late_kernel", 700_000.0, 700_010.0, 100.0)
    got, _ = _run(b, tmp_path, "gpu-starvation")
    assert len(got) == 1 and got[0].evidence.counts["gaps"] == 1
    assert got[0].evidence.examples[0].dur_us > 500_000
    got, _ = _run(_busy(), tmp_path, "gpu-starvation", "busy.json")
    assert got == []


def test_host_bound_and_launch_overhead(tmp_path):
    got, _ = _run(_host_bound(), tmp_path, "host-bound")
    assert len(got) == 1 and got[0].evidence.share > 0.3
    assert _run(_busy(), tmp_path, "host-bound", "busy.json")[0] == []
    # launch overhead: kernels queued long before they run, 20 µs gaps between them
    b = TraceBuilder()
    for i in range(100):
        b.launch("k", i * 1.0, 1000.0 + i * 120.0, 100.0, dur=0.5)
    got, _ = _run(b, tmp_path, "launch-overhead", "lo.json")
    assert len(got) == 1 and got[0].evidence.counts["gaps"] == 99
    assert _run(_busy(), tmp_path, "launch-overhead", "busy2.json")[0] == []


def test_short_kernels_positive_and_negative(tmp_path):
    got, _ = _run(_host_bound(), tmp_path, "short-kernels")  # 4 µs kernels, 5 µs launches
    assert len(got) == 1 and got[0].evidence.counts["share_of_launches"] == 1.0
    assert _run(_busy(), tmp_path, "short-kernels", "busy.json")[0] == []


def test_slow_runtime_calls_positive_and_negative(tmp_path):
    b = _host_bound()
    b.launch("k", 20_000.0, 20_300.0, 5.0, dur=250.0)
    got, _ = _run(b, tmp_path, "slow-runtime-calls")
    assert len(got) == 1 and got[0].evidence.counts["slow_calls"] == 1
    assert got[0].severity.rank <= Severity.MEDIUM.rank  # a symptom: capped
    assert _run(_host_bound(), tmp_path, "slow-runtime-calls", "ok.json")[0] == []


def test_slow_runtime_calls_leave_blocking_copies_to_other_rules(tmp_path):
    # a cudaMemcpyAsync to pageable memory blocks the host until the copy is done: sync-calls and pageable-memcpy
    # report it, not this rule (negative_queue: 604 ms of such .cpu() copies)
    b = _host_bound()
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 20_000.0, 20_010.0, 9_990.0, nbytes=1 << 20, dur=10_000.0)
    report = analyze(b.write(tmp_path / "copy.json"), rules=["slow-runtime-calls", "sync-calls", "pageable-memcpy"])
    assert report.findings_of("slow-runtime-calls") == []
    assert report.findings_of("sync-calls") and report.findings_of("pageable-memcpy")
    b.launch("k", 40_000.0, 40_300.0, 5.0, dur=250.0)  # a slow launch beside the copy is still reported
    got, _ = _run(b, tmp_path, "slow-runtime-calls", "both.json")
    assert len(got) == 1 and got[0].evidence.counts["slow_calls"] == 1
    assert got[0].evidence.time_lost_us == pytest.approx(200.0)
    assert got[0].evidence.counts["pageable_copy_calls"] == 1


def test_launch_queue_positive_and_negative(tmp_path):
    b = TraceBuilder()
    for i in range(50):  # every kernel starts 500 µs after its launch, GPU mostly idle
        b.launch("k", i * 1000.0, i * 1000.0 + 505.0, 10.0)
    got, _ = _run(b, tmp_path, "launch-queue")
    assert len(got) == 1 and got[0].evidence.counts["delayed_launches"] == 50
    assert got[0].severity is Severity.LOW
    assert _run(_host_bound(), tmp_path, "launch-queue", "ok.json")[0] == []


# ---- synchronization and copies ------------------------------------------------------------------------------
def test_sync_calls_positive_and_negative(tmp_path):
    b = _host_bound()
    b.runtime("cudaStreamSynchronize", 2_000.0, 50.0)
    b.cpu("aten::item", 3_000.0, 30.0)
    b.cpu("aten::_local_scalar_dense", 3_001.0, 28.0)
    got, _ = _run(b, tmp_path, "sync-calls")
    assert len(got) == 1
    assert got[0].evidence.counts["sync_runtime_calls"] == 1 and got[0].evidence.counts["item_calls"] == 1
    assert _run(_host_bound(), tmp_path, "sync-calls", "ok.json")[0] == []


def test_pageable_memcpy_positive_and_negative(tmp_path):
    b = _busy(n=20)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 100.0, 2500.0, 50.0, nbytes=1 << 20)
    got, _ = _run(b, tmp_path, "pageable-memcpy")
    assert len(got) == 1 and got[0].evidence.counts["bytes"] == 1 << 20
    b = _busy(n=20)
    b.memcpy("Memcpy HtoD (Pinned -> Device)", 100.0, 2500.0, 50.0, nbytes=1 << 20)
    assert _run(b, tmp_path, "pageable-memcpy", "pinned.json")[0] == []


def test_sync_memcpy_positive_and_negative(tmp_path):
    b = _busy(n=20)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 100.0, 2500.0, 50.0, nbytes=1 << 20, call="cudaMemcpy", dur=80.0)
    got, _ = _run(b, tmp_path, "sync-memcpy")
    assert len(got) == 1 and got[0].evidence.counts["calls"] == 1
    b = _busy(n=20)  # a small synchronous HtoD copy is skipped (staged by the driver anyway)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 100.0, 2500.0, 5.0, nbytes=4096, call="cudaMemcpy")
    assert _run(b, tmp_path, "sync-memcpy", "small.json")[0] == []


def test_sync_memset_positive_and_negative(tmp_path):
    b = _busy(n=20)
    b.runtime("cudaMemset", 300.0, 40.0)
    got, _ = _run(b, tmp_path, "sync-memset")
    assert len(got) == 1 and got[0].evidence.time_lost_us == 40.0
    b = _busy(n=20)
    b.runtime("cudaMemsetAsync", 300.0, 4.0)
    assert _run(b, tmp_path, "sync-memset", "async.json")[0] == []


# ---- host side -----------------------------------------------------------------------------------------------
def _steps_with_loader(loader_us: float) -> TraceBuilder:
    b = TraceBuilder(capability=None)
    for i in range(4):
        t = i * 10_000.0
        b.step(i, t, 10_000.0)
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 10, loader_us)
        b.cpu("aten::mm", t + 20 + loader_us, 9_000.0 - loader_us)
    return b


def test_dataloader_positive_and_negative(tmp_path):
    got, _ = _run(_steps_with_loader(3_000.0), tmp_path, "dataloader")
    assert len(got) == 1 and got[0].evidence.counts["batches"] == 4
    assert got[0].evidence.share == pytest.approx(0.3)
    assert _run(_steps_with_loader(100.0), tmp_path, "dataloader", "fast.json")[0] == []


def test_data_parallel_positive_and_negative(tmp_path):
    b = _busy(n=5)
    b.cpu("DataParallel.forward", 10.0, 100.0, cat="python_function")
    got, _ = _run(b, tmp_path, "data-parallel")
    assert len(got) == 1 and got[0].severity is Severity.MEDIUM
    b = _busy(n=5)
    b.cpu("DistributedDataParallel.forward", 10.0, 100.0, cat="python_function")
    assert _run(b, tmp_path, "data-parallel", "ddp.json")[0] == []
    b = TraceBuilder(backend="gloo", world_size=2)
    b.busy_gpu(0.0, 5)
    got, _ = _run(b, tmp_path, "data-parallel", "gloo.json")
    assert len(got) == 1 and "gloo" in got[0].title


def test_optimizer_synthetic_positive_and_negative(tmp_path):
    b = TraceBuilder(capability=None)
    b.cpu("Optimizer.step#Adam.step", 0.0, 100.0, cat="user_annotation")
    for i in range(6):
        b.cpu("aten::addcmul_", 1.0 + i * 10, 5.0)
    b.cpu("Optimizer.zero_grad#Adam.zero_grad", 200.0, 50.0, cat="user_annotation")
    b.cpu("aten::zero_", 201.0, 10.0)
    got, _ = _run(b, tmp_path, "optimizer")
    assert {f.fix.split(" ")[0] for f in got} == {"Use", "Call"}  # single-tensor and zero_grad findings
    b = TraceBuilder(capability=None)
    b.cpu("Optimizer.step#Adam.step", 0.0, 100.0, cat="user_annotation")
    b.cpu("aten::_foreach_addcmul_", 1.0, 50.0)
    b.cpu("Optimizer.zero_grad#Adam.zero_grad", 200.0, 5.0, cat="user_annotation")
    assert _run(b, tmp_path, "optimizer", "foreach.json")[0] == []


def test_cpu_init_copy_synthetic_positive_and_negative(tmp_path):
    b = _busy(n=5)
    b.cpu("aten::zeros", 1000.0, 10.0)
    b.cpu("aten::zero_", 1002.0, 5.0)
    b.cpu("aten::to", 1020.0, 50.0)
    b.cpu("aten::_to_copy", 1021.0, 48.0)
    b.cpu("aten::copy_", 1022.0, 45.0)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 1025.0, 1100.0, 10.0, nbytes=256)
    got, _ = _run(b, tmp_path, "cpu-init-copy")
    assert len(got) == 1 and got[0].evidence.counts["copies"] == 1
    b = _busy(n=5)
    b.cpu("aten::mm", 1000.0, 10.0)
    b.cpu("aten::to", 1020.0, 50.0)
    assert _run(b, tmp_path, "cpu-init-copy", "mm.json")[0] == []


# ---- GPU work -----------------------------------------------------------------------------------------------
def test_exposed_comm_positive_negative_and_not_applicable(tmp_path):
    b = _busy(n=10)  # 1 ms of compute, then 1 ms of NCCL alone
    b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 100.0, 1000.0, 1000.0, stream=20)
    got, _ = _run(b, tmp_path, "exposed-comm")
    assert len(got) == 1 and got[0].evidence.share == pytest.approx(0.5)
    b = _busy(n=20)  # NCCL fully under compute
    b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 100.0, 200.0, 1000.0, stream=20)
    assert _run(b, tmp_path, "exposed-comm", "hidden.json")[0] == []
    got, outcome = _run(_busy(), tmp_path, "exposed-comm", "none.json")
    assert got == [] and outcome[0].status == "skipped" and "no communication" in outcome[0].reason


def test_no_tensor_cores_positive_and_negative(tmp_path):
    b = TraceBuilder(capability=(8, 0))
    b.busy_gpu(0.0, 20, name="volta_sgemm_128x64_nn")
    got, _ = _run(b, tmp_path, "no-tensor-cores")
    assert len(got) == 1 and got[0].evidence.counts["gemm_kernels"] == 20
    b = TraceBuilder(capability=(8, 0))
    b.busy_gpu(0.0, 20, name="ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn")
    assert _run(b, tmp_path, "no-tensor-cores", "tc.json")[0] == []
    b = TraceBuilder(capability=(6, 0))  # Pascal: no tensor cores to use
    b.busy_gpu(0.0, 20, name="maxwell_sgemm_128x64_nn")
    assert _run(b, tmp_path, "no-tensor-cores", "pascal.json")[0] == []


def test_unaligned_gemm_positive_negative_and_needs_shapes(tmp_path):
    def mm(dims: list) -> TraceBuilder:
        b = TraceBuilder(record_shapes=True)
        b.busy_gpu(0.0, 5)
        b.cpu("aten::mm", 10.0, 30.0, **{"Input Dims": dims, "Input type": ["c10::Half", "c10::Half"]})
        return b

    got, _ = _run(mm([[13, 64], [64, 32]]), tmp_path, "unaligned-gemm")
    assert len(got) == 1 and "13" in got[0].evidence.examples[0].name
    assert _run(mm([[16, 64], [64, 32]]), tmp_path, "unaligned-gemm", "aligned.json")[0] == []
    noshapes = _busy()
    noshapes.cpu("aten::mm", 10.0, 30.0)
    got, outcome = _run(noshapes, tmp_path, "unaligned-gemm", "noshapes.json")
    assert outcome[0].status == "skipped" and "record_shapes" in (outcome[0].enable_with or "")


def test_memory_pressure_positive_negative_and_needs_memory(tmp_path):
    b = _busy(n=5)
    b.memory(10.0, int(0.95 * 40 * 2**30))
    got, _ = _run(b, tmp_path, "memory-pressure")
    assert len(got) == 1 and got[0].evidence.counts["peak_share"] == pytest.approx(0.95)
    b = _busy(n=5)
    b.memory(10.0, 2**30)
    assert _run(b, tmp_path, "memory-pressure", "low.json")[0] == []
    got, outcome = _run(_busy(), tmp_path, "memory-pressure", "nomem.json")
    assert outcome[0].status == "skipped" and "profile_memory" in (outcome[0].enable_with or "")


# ---- cross-rank ---------------------------------------------------------------------------------------------
def _ranks(tmp_path: Path, step_us: list[float]) -> Path:
    folder = tmp_path / "job"
    for r, d in enumerate(step_us):
        b = TraceBuilder(rank=r, world_size=len(step_us))
        for i in range(3):
            b.step(i, i * d, d)
        b.busy_gpu(0.0, 5)
        b.write(folder / f"rank-{r}.json")
    return folder


def test_straggler_positive_and_negative(tmp_path):
    report = analyze(_ranks(tmp_path / "a", [100_000, 101_000, 99_000, 100_500, 150_000]), rules=["straggler"])
    got = report.findings_of("straggler")
    assert len(got) == 1 and got[0].rank == 4
    report = analyze(_ranks(tmp_path / "b", [100_000, 100_500, 99_800, 100_200]), rules=["straggler"])
    assert report.findings_of("straggler") == []
    assert [o.status for o in report.rules] == ["clean"]


def _cpu_ranks(tmp_path: Path, waits_us: list[float]) -> Path:
    """CPU-only DDP-like ranks (gloo): equal 100 ms steps; each rank waits `wait` µs per step in gloo:all_reduce."""
    folder = tmp_path / "cpujob"
    for r, wait in enumerate(waits_us):
        b = TraceBuilder(rank=r, world_size=len(waits_us))
        for i in range(4):
            b.step(i, i * 100_000, 100_000)
            b.cpu("aten::mm", i * 100_000 + 1_000, 5_000)
            b.cpu("gloo:all_reduce", i * 100_000 + 90_000 - wait, wait + 1_000, cat="user_annotation", tid=99)
        b.write(folder / f"rank-{r}.json")
    return folder


def test_straggler_on_two_cpu_ranks_found_by_collective_wait(tmp_path):
    # rank 1 is late: rank 0 waits 60 ms per step for it inside gloo:all_reduce; step times stay equal
    got = analyze(_cpu_ranks(tmp_path / "a", [60_000, 1_000]), rules=["straggler"]).findings_of("straggler")
    assert len(got) == 1 and got[0].rank == 1 and "wait for it in collectives" in got[0].title
    assert got[0].evidence.time_lost_us == pytest.approx(4 * 59_000)
    # both ranks wait about the same: nobody is late
    assert analyze(_cpu_ranks(tmp_path / "b", [3_000, 2_500]), rules=["straggler"]).findings_of("straggler") == []


# ---- CPU-only traces and engine behaviour -------------------------------------------------------------------
def test_gpu_rules_not_applicable_on_cpu_only_trace(tmp_path):
    report = analyze(_steps_with_loader(100.0).write(tmp_path / "cpu.json"))
    skipped = {o.rule_id: o.reason for o in report.rules if o.status == "skipped"}
    for rid in ("low-gpu-util", "gpu-starvation", "short-kernels", "pageable-memcpy", "sync-memcpy"):
        assert skipped[rid] == "not applicable (no GPU activity)"
    assert "dataloader" not in skipped and "optimizer" not in skipped


def test_every_catalogue_rule_is_registered():
    ids = [r.id for r in ALL_RULES]
    assert ids == [
        "low-gpu-util", "gpu-starvation", "host-bound", "launch-overhead", "short-kernels", "slow-runtime-calls",
        "launch-queue", "sync-calls", "pageable-memcpy", "sync-memcpy", "sync-memset", "dataloader",
        "exposed-comm", "no-tensor-cores", "unaligned-gemm", "memory-pressure", "data-parallel", "optimizer",
        "cpu-init-copy", "tiny-ops", "straggler",
    ]  # fmt: skip
    for r in ALL_RULES:
        assert r.fix and r.title and isinstance(dict(r.thresholds), dict)


def test_findings_sorted_by_severity_then_time_lost(tmp_path):
    b = _host_bound()
    b.runtime("cudaStreamSynchronize", 2_000.0, 50.0)
    report = analyze(b.write(tmp_path / "t.json"))
    keys = [(f.severity.rank, f.evidence.time_lost_us) for f in report.findings]
    assert len(keys) >= 3 and keys == sorted(keys, reverse=True)


def test_findings_without_measurable_time_sort_by_severity(tmp_path):
    # memory-pressure (high) and data-parallel (medium) have no time lost; sorted by time lost first they came
    # last, below a low pageable copy of a few µs and an info finding
    b = _busy(n=20)
    b.memory(10.0, int(0.99 * 40 * 2**30))
    b.cpu("DataParallel.forward", 10.0, 100.0, cat="python_function")
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 100.0, 1000.0, 5.0, nbytes=1 << 20)
    b.launch("k", 1_200.0, 1_500.0, 5.0, dur=250.0)  # a slow launch: info on this GPU-bound trace
    report = analyze(b.write(tmp_path / "t.json"))
    order = [(f.rule_id, f.severity.value) for f in report.findings]
    assert order[:2] == [("memory-pressure", "high"), ("data-parallel", "medium")], order
    assert ("pageable-memcpy", "low") in order and order[-1][1] == "info", order


def test_threshold_override_changes_outcome(tmp_path):
    path = _steps_with_loader(1_000.0).write(tmp_path / "t.json")  # 10% of the step
    assert analyze(path, rules=["dataloader"]).findings_of("dataloader")
    assert not analyze(path, rules=["dataloader"], thresholds={"dataloader.max_share": "15%"}).findings
