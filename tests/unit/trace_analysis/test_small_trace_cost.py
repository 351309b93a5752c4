"""Fixed cost of the analyses and rules on small traces: replacements of numpy helpers must give numpy's exact
values, literal prefilters of name filters must never drop a match, caches must equal a fresh computation."""

from __future__ import annotations

import re

import numpy as np
import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis.analyses.arrays import linspace, unique_inverse

pytestmark = pytest.mark.unit


def _bounds() -> list[tuple[float, float]]:
    rng = np.random.default_rng(7)
    out = [(0.0, 1.0), (1.0, 1.0), (5.0, -3.0), (0.0, 5e-324), (1e-310, 3e-310), (-0.0, 0.0)]
    out += [(1_694_039_959_000_000.0, 1_694_040_000_600_000.25), (1712195495519695.8, 1712195495519700.1)]
    for _ in range(200):
        lo = float(rng.normal(0, 1e6)) + (1.7e15 if rng.random() < 0.5 else 0.0)
        out.append((lo, lo + float(rng.exponential(1e5))))
    return out


@pytest.mark.parametrize("num", [2, 3, 7, 31, 61])
def test_linspace_equals_numpy_bit_for_bit(num: int) -> None:
    for lo, hi in _bounds():
        got, want = linspace(lo, hi, num), np.linspace(lo, hi, num)
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes(), (lo, hi, num)


def test_unique_inverse_equals_np_unique() -> None:
    rng = np.random.default_rng(3)
    cases = [np.empty(0, np.int32), np.array([5], np.int32), np.array([-1, 3, -1, 2], np.int32)]
    cases += [rng.integers(0, 60, size=n).astype(dt) for n in (1, 2, 50, 999) for dt in (np.int32, np.int64)]
    cases += [rng.integers(-5, 60, size=300).astype(np.int64)]
    for a in cases:
        ids, inv = unique_inverse(a)
        w_ids, w_inv = np.unique(a, return_inverse=True)
        assert ids.dtype == w_ids.dtype and np.array_equal(ids, w_ids)
        assert inv.dtype == w_inv.dtype and np.array_equal(inv, w_inv)


# (pattern as the code matches it, the literals passed as its needles); a match must contain one of them
_NEEDLED = [
    (re.compile(r"^ProfilerStep\s*#\s*(\d+)$").match, ("ProfilerStep",)),
    (re.compile(r"^ProfilerStep#\d+$").match, ("ProfilerStep#",)),
    (re.compile(r"^Optimizer\.step#").match, ("Optimizer.step#",)),
    (re.compile(r"^Optimizer\.zero_grad#").match, ("Optimizer.zero_grad#",)),
    (re.compile(r"^enumerate\((DataLoader|DataPipe)\)#.*__next__$").match, ("enumerate(",)),
    (re.compile(r"_single_tensor_(adam|adamw|sgd)").search, ("_single_tensor_",)),
    (re.compile(r"^aten::_(foreach|fused)_").match, ("aten::_foreach_", "aten::_fused_")),
    (re.compile(r"(?<!Distributed)DataParallel\.forward|^nn\.Module: DataParallel(_\d+)?$").search, ("DataParallel",)),
]


def _rule_patterns() -> list:
    from dyno.trace_analysis.rules import host_ops, sync

    return [
        (sync._SYNC_MEMCPY.match, ("cudaMemcpy", "cuMemcpy")),
        (sync._SYNC_MEMSET.match, ("cudaMemset", "cuMemset")),
        (host_ops._DATALOADER.match, ("enumerate(",)),
        (host_ops._SINGLE_TENSOR_PY.search, ("_single_tensor_",)),
        (host_ops._DATA_PARALLEL.search, ("DataParallel",)),
    ]


def _corpus() -> list[str]:
    return [
        "ProfilerStep#3", "ProfilerStep #12", "ProfilerStep  #  4", "xProfilerStep#1", "Optimizer.step#SGD.step",
        "Optimizer.zero_grad#SGD.zero_grad", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "enumerate(DataPipe)#x.__next__", "torch/optim/sgd.py(300): _single_tensor_sgd", "aten::_foreach_add_",
        "aten::_fused_adam_", "nn.Module: DataParallel_0", "DataParallel.forward", "DistributedDataParallel.forward",
        "cudaMemcpy", "cudaMemcpyAsync", "cuMemcpyHtoD_v2", "cudaMemset2D", "cuMemsetD32_v2", "aten::add_", "",
    ]  # fmt: skip


def test_needles_are_necessary_for_their_patterns() -> None:
    names = _corpus()
    for match, needles in _NEEDLED + _rule_patterns():
        hits = [n for n in names if match(n)]
        assert hits, needles  # the corpus exercises every pattern
        for n in hits:
            assert any(x in n for x in needles), (n, needles)


def _trace(tmp_path):
    from dyno.trace_analysis.loader import load_trace

    b = TraceBuilder()
    b.step(1, 0.0, 500.0)
    b.step(2, 500.0, 500.0)
    b.cpu("Optimizer.step#SGD.step", 100.0, 50.0)
    b.cpu("aten::add_", 110.0, 5.0)
    b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 600.0, 20.0)
    b.launch("void gemm_kernel()", 10.0, 20.0, 40.0)
    b.launch("void relu_kernel()", 700.0, 720.0, 4.0, stream=9)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 15.0, 110.0, 5.0, 4096, call="cudaMemcpy")
    return load_trace(b.write(tmp_path / "t.json"))


def test_name_mask_needles_equal_plain_predicate_and_names_text_cache(tmp_path) -> None:
    from dyno.trace_analysis.model import Cat

    t = _trace(tmp_path)
    tables = [t.events, t.events_of(Cat.CPU_OP, Cat.USER_ANNOTATION), t.events_of(Cat.CUDA_RUNTIME)]
    for ev in tables:
        for match, needles in _NEEDLED:
            pred = lambda n, m=match: m(n) is not None  # noqa: E731
            assert np.array_equal(t.name_mask(ev, pred, needles), t.name_mask(ev, pred))
        # a needle no name holds: all false, as the predicate gives
        assert not t.name_mask(ev, lambda n: "zzz" in n, "zzz").any()
        text = t.names_text(ev)
        assert text == "\n".join(t.strings[i] for i in t.name_ids(ev).tolist())
        assert t.names_text(ev) is text  # cached for tables that live as long as the trace
    sub = t.events.take(np.arange(2))
    assert t.names_text(sub) == "\n".join(t.strings[i] for i in t.name_ids(sub).tolist())
    assert ("names_text", id(sub)) not in t._cache


def test_busiest_stream_cache_equals_fresh(tmp_path) -> None:
    from dyno.trace_analysis.rules._common import busiest_stream
    from dyno.trace_analysis.rules.context import RuleContext

    t = _trace(tmp_path)
    first = busiest_stream(RuleContext(t))
    t._cache.pop(("rules.busiest_stream",))
    assert busiest_stream(RuleContext(t)) == first == 7


def test_member_equals_np_isin() -> None:
    from dyno.trace_analysis.analyses.arrays import member

    rng = np.random.default_rng(11)
    for n, m in ((0, 3), (4, 0), (1, 1), (50, 7), (500, 200)):
        a = rng.integers(-3, 40, size=n)
        b = rng.integers(-3, 40, size=m)
        assert np.array_equal(member(a, b), np.isin(a, b))


def test_small_sub_tables_read_sparse_columns_like_the_bisection(tmp_path) -> None:
    from dyno.trace_analysis.events import _densify
    from dyno.trace_analysis.model import EVENT_DTYPES, Cat

    t = _trace(tmp_path)
    sparse = dict(t.events._sparse)
    assert sparse  # mostly-absent columns (GPU args on CPU rows, ...) are held sparse
    for cats in ((Cat.KERNEL,), (Cat.CUDA_RUNTIME, Cat.GPU_MEMCPY), (Cat.CPU_OP,)):
        sub = t.events_of(*cats)
        for name, sp in sparse.items():
            want = _densify(sp, sub.index, len(sub), EVENT_DTYPES[name])  # the bisection over the sparse rows
            got = getattr(sub, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), name


def test_scope_kernel_types_and_activity_mask_equal_fresh(tmp_path) -> None:
    from dyno.trace_analysis.analyses.gpu import gpu_scope, kernel_types, scope_kernel_types
    from dyno.trace_analysis.model import Cat

    t = _trace(tmp_path)
    for last in (False, True):
        for rounding in (False, True):
            scope = gpu_scope(t, last, rounding)
            kt = scope_kernel_types(t, last, rounding)
            assert np.array_equal(kt, kernel_types(t, scope.rows))
            assert np.array_equal(kt[scope.is_activity], kernel_types(t, scope.activity))
            assert np.array_equal(scope.is_activity, scope.rows.cat != Cat.CUDA_SYNC)
            assert not kt.flags.writeable and not scope.is_activity.flags.writeable
            assert scope_kernel_types(t, last, rounding) is kt


def test_coverage_before_equals_the_np_clip_formula() -> None:
    from dyno.trace_analysis.analyses.intervals import coverage_before, merge

    def reference(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
        cum = np.concatenate(([0.0], np.cumsum(ends - starts)))
        k = np.searchsorted(starts, t, side="right")
        kk = np.maximum(k - 1, 0)
        return cum[kk] + np.where(k > 0, np.clip(t - starts[kk], 0.0, ends[kk] - starts[kk]), 0.0)

    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 40):
        s = np.sort(rng.uniform(0, 1000, n)) + 1.7e15
        s, e = merge(s, s + rng.exponential(20, n))
        t = np.concatenate((rng.uniform(1.7e15 - 10, 1.7e15 + 1100, 50), s, e, [np.nan]))
        assert reference(s, e, t).tobytes() == coverage_before(s, e, t).tobytes()


def test_merge_equals_the_stable_sort_formulation() -> None:
    from dyno.trace_analysis.analyses.intervals import merge

    def reference(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
        running = np.maximum.accumulate(e)
        new = np.concatenate(([True], s[1:] > running[:-1]))
        first = np.flatnonzero(new)
        return s[first], np.maximum.reduceat(e, first)

    rng = np.random.default_rng(9)
    for n in (1, 2, 3, 10, 200):
        s = rng.integers(0, 50, n).astype(np.float64)
        e = s + rng.integers(0, 10, n)
        for start in (s, np.sort(s), np.sort(s)[::-1].copy(), np.where(rng.random(n) < 0.1, np.nan, s)):
            end = start + (e - s)
            got, want = merge(start, end), reference(start, end)
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def _sync_trace(tmp_path, weird_sync: bool):
    from dyno.trace_analysis.loader import load_trace

    b = TraceBuilder()
    b.launch("void gemm_kernel()", 10.0, 20.0, 40.0)
    b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 12.0, 50.0, 30.0, stream=20)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 15.0, 110.0, 5.0, 4096)
    corr = b.runtime("cudaStreamSynchronize", 120.0, 30.0)
    b.gpu("cuda_sync", "Stream Sync", 125.0, 20.0, corr)
    if weird_sync:  # a cuda_sync row whose name classifies as computation: the two breakdowns differ there
        corr = b.runtime("cudaEventSynchronize", 160.0, 30.0)
        b.gpu("cuda_sync", "some wait", 100.0, 80.0, corr)
    return load_trace(b.write(tmp_path / f"sync{int(weird_sync)}.json"))


@pytest.mark.parametrize("weird_sync", [False, True])
def test_temporal_breakdowns_share_type_unions_in_either_order(tmp_path, weird_sync: bool) -> None:
    from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, scope_kernel_types
    from dyno.trace_analysis.analyses.intervals import union_length
    from dyno.trace_analysis.analyses.temporal import temporal_breakdown

    def reference(t, sync_is_busy: bool) -> tuple[float, float, float, float]:
        scope = gpu_scope(t)
        sel = np.ones(len(scope.rows), bool) if sync_is_busy else np.asarray(scope.is_activity)
        kt, ts, end = scope_kernel_types(t)[sel], scope.ts[sel], scope.end[sel]
        u = [union_length(ts[kt == k.value], end[kt == k.value]) for k in KernelType]
        return union_length(ts, end), u[KernelType.COMPUTATION], u[KernelType.COMMUNICATION], u[KernelType.MEMORY]

    for first in (True, False):
        t = _sync_trace(tmp_path, weird_sync)
        got = {b: temporal_breakdown(t, sync_is_busy=b) for b in (first, not first)}
        for b, tb in got.items():
            assert (tb.busy_us, tb.compute_us, tb.communication_us, tb.memory_us) == reference(t, b)
    assert (got[True].compute_us != got[False].compute_us) == weird_sync


def test_events_of_drops_absent_categories_from_the_key(tmp_path) -> None:
    from dyno.trace_analysis.model import Cat

    t = _trace(tmp_path)  # no python_function, cuda_sync or memset events
    a = t.events_of(Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.PYTHON_FUNCTION)
    assert a is t.events_of(Cat.USER_ANNOTATION, Cat.CPU_OP)
    assert a.index.tolist() == np.flatnonzero(np.isin(t.events.cat, [Cat.CPU_OP, Cat.USER_ANNOTATION])).tolist()
    empty = t.events_of(Cat.CUDA_SYNC, Cat.GPU_MEMSET)
    assert len(empty) == 0 and empty.ts.dtype == np.float64
    g = t.events_of(Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.CUDA_SYNC)
    assert g.index.tolist() == np.flatnonzero(np.isin(t.events.cat, [Cat.KERNEL, Cat.GPU_MEMCPY])).tolist()


def test_optimizer_step_windows_equal_the_full_table_filter(tmp_path) -> None:
    from dyno.trace_analysis.analyses.steps import step_timings
    from dyno.trace_analysis.loader import load_trace
    from dyno.trace_analysis.model import Cat

    b = TraceBuilder()
    for k in range(4):
        t0 = k * 1000.0
        b.cpu("aten::mm", t0, 100.0)
        b.cpu(f"Optimizer.step#SGD.step#{k}", t0 + 600.0 + k, 100.0, cat="user_annotation")
        b.cpu(f"Optimizer.step#SGD.step#{k}", t0 + 605.0 + k, 50.0, cat="python_function")  # nested duplicate
    b.cpu("Optimizer.step#not.a.host.row", 50.0, 10.0, cat="kernel")
    t = load_trace(b.write(tmp_path / "opt.json"))
    st = step_timings(t)
    ev = t.events
    cpu = np.isin(ev.cat, [Cat.USER_ANNOTATION, Cat.CPU_OP, Cat.PYTHON_FUNCTION])
    opt = ev.take(cpu & np.array([t.strings[i].startswith("Optimizer.step#") for i in ev.name.tolist()]))
    ends = opt.end
    keep = np.ones(len(opt), dtype=bool)
    keep[1:] = opt.ts[1:] >= np.maximum.accumulate(ends)[:-1]
    ends = ends[keep]
    assert st.source == "optimizer"
    assert [(s.ts, s.end) for s in st.steps] == list(zip(ends[:-1].tolist(), ends[1:].tolist(), strict=True))


def test_rule_context_shortcuts_equal_fresh(tmp_path) -> None:
    from dyno.trace_analysis.analyses.gpu import KernelType, kernel_types
    from dyno.trace_analysis.analyses.memcpy import memory_copies
    from dyno.trace_analysis.rules.context import RuleContext
    from dyno.trace_analysis.rules.gpu_work import _is_comm

    t = _sync_trace(tmp_path, True)
    ctx = RuleContext(t)
    assert ctx.first_gpu_device == int(ctx.gpu_device_of(ctx.gpu_activity)[0])
    assert np.array_equal(_is_comm(ctx), kernel_types(t, ctx.kernels) == KernelType.COMMUNICATION)
    assert _is_comm(ctx) is _is_comm(ctx)
    # memcpy kinds: example_ts is the first row of each kind
    mc = memory_copies(t)
    assert [k.example_ts for k in mc.kinds] == [110.0]
