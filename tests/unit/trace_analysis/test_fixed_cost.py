"""Fixed-cost work in the analyses and rules: helpers that replace slow numpy first calls, and per-trace caches.

The helpers must give exactly numpy's values; cached intermediates must equal a fresh computation and never leak
from one trace to another.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis.analyses.arrays import distinct, median

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 100, 1001])
def test_distinct_equals_np_unique(n: int) -> None:
    rng = np.random.default_rng(n)
    for dtype in (np.int64, np.int16, np.int8):
        a = rng.integers(-5, 20, size=n).astype(dtype)
        got = distinct(a)
        want = np.unique(a)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)
    f = rng.normal(size=n)
    assert np.array_equal(distinct(np.r_[f, f]), np.unique(f))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 11, 999, 1000])
def test_median_equals_np_median(n: int) -> None:
    rng = np.random.default_rng(n)
    f = rng.exponential(100.0, size=n)
    assert median(f) == float(np.median(f))
    i = rng.integers(0, 50, size=n)
    assert median(i) == float(np.median(i))
    assert median(list(f)) == float(np.median(list(f)))


def test_median_nan_and_empty() -> None:
    assert np.isnan(median(np.array([1.0, np.nan, 3.0])))
    assert np.isnan(median(np.empty(0)))


def test_analysis_does_not_import_numpy_ma(tmp_path) -> None:
    """numpy.ma costs 6-10 ms to import on first use (np.unique without options, np.median): a fresh process
    that loads and analyses a GPU trace must not pull it in."""
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1000.0, 900.0)
        for k in range(4):
            t = s * 1000.0 + k * 100.0
            b.launch("void gemm_kernel()", t + 10.0, t + 20.0, 40.0)
        b.cpu("aten::item", s * 1000.0 + 800.0, 50.0)
    path = b.write(tmp_path / "t.json")
    code = (
        "import sys\n"
        "from dyno.trace_analysis import analyze\n"
        f"r = analyze([{str(path)!r}])\n"
        "assert r.findings\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _two_traces(tmp_path) -> tuple:
    from dyno.trace_analysis.loader import load_trace

    a, b = TraceBuilder(rank=0), TraceBuilder(rank=1)
    a.launch("void gemm_kernel()", 10.0, 20.0, 40.0)
    a.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 12.0, 70.0, 30.0, stream=20)
    a.memcpy("Memcpy HtoD (Pageable -> Device)", 15.0, 110.0, 5.0, 4096)
    a.cpu("aten::item", 150.0, 5.0)
    a.cpu("input dims only", 160.0, 5.0, **{"Input Dims": [[8, 8]], "Input type": ["float"]})
    # rank 1: the same names interned in another order, plus names rank 0 lacks
    b.cpu("aten::zero_", 1.0, 2.0)
    b.launch("Memset (Device)", 10.0, 20.0, 3.0, call="cudaMemsetAsync")
    b.launch("void gemm_kernel()", 30.0, 40.0, 10.0)
    return load_trace(a.write(tmp_path / "a.json")), load_trace(b.write(tmp_path / "b.json"))


def _full_mask(trace, events, pred) -> np.ndarray:
    """The reference: the predicate over every string of the table (the simple form name_mask must match)."""
    table = np.array([pred(s) for s in trace.strings] + [False], dtype=bool)
    return table[events.name]


def test_name_mask_equals_full_table_and_name_ids_cache(tmp_path) -> None:
    from dyno.trace_analysis.model import Cat

    ta, tb = _two_traces(tmp_path)
    preds = [
        lambda n: n.startswith("cuda"),
        lambda n: "gemm" in n,
        lambda n: n.startswith("Memcpy") or n.startswith("Memset"),
        lambda n: True,  # would also match args strings and categories in the full table; not present as names
    ]
    for t in (ta, tb):
        for ev in (t.events, t.events_of(Cat.KERNEL), t.events_of(Cat.CPU_OP), t.events_of(Cat.CUDA_RUNTIME)):
            for p in preds:
                assert np.array_equal(t.name_mask(ev, p), _full_mask(t, ev, p))
            ids = t.name_ids(ev)
            assert ids.tolist() == sorted(set(ev.name.tolist()))
            assert t.name_ids(ev) is ids  # cached for tables that live as long as the trace
    # a transient sub-table is answered correctly but not cached (it would pin its rows)
    sub = ta.events.take(np.arange(2))
    assert ta.name_ids(sub).tolist() == sorted(set(sub.name.tolist()))
    assert ("name_ids", id(sub)) not in ta._cache
    # no leak between traces: each trace answers with its own ids
    assert ta.name_ids(ta.events).tolist() != tb.name_ids(tb.events).tolist()


def test_kernel_types_and_launch_table_equal_fresh_classification(tmp_path) -> None:
    from dyno.trace_analysis.analyses.gpu import LAUNCH_NAMES, _kernel_type_of, is_launch_name, kernel_types
    from dyno.trace_analysis.model import GPU_CATS

    for t in _two_traces(tmp_path):
        gpu = t.events_of(*GPU_CATS)
        # asked first about a subset, then about everything: the lazily filled table stays right
        for ev in (gpu, t.events, gpu):
            want = np.array([_kernel_type_of(t.strings[i]) for i in ev.name.tolist()], dtype=np.int8)
            assert np.array_equal(kernel_types(t, ev), want)
        launch = is_launch_name(t)
        assert [s for i, s in enumerate(t.strings) if launch[i]] == [s for s in t.strings if s in LAUNCH_NAMES]
        assert not launch[-1]


def test_kernel_type_string_tests_equal_hta_regexes() -> None:
    import re

    from dyno.trace_analysis.analyses.gpu import KernelType, _kernel_type_of

    comm = re.compile(r"^nccl.*Kernel")
    memory = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
    non_compute = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")  # HTA 0.5.0, verbatim

    def hta(name: str) -> int:
        if comm.match(name):
            return KernelType.COMMUNICATION
        if memory.match(name):
            return KernelType.MEMORY
        if not non_compute.match(name):
            return KernelType.COMPUTATION
        return KernelType.OTHER

    names = [
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "nccl",
        "ncclKernel",
        "ncclKerne",
        "nccl\nKernel",
        "ncclX\nfooKernel",
        "ncclKernel\nx",
        "xncclKernel",
        "Memcpy HtoD (Pageable -> Device)",
        "Memset (Device)",
        "dma_copy",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>(Params)",
        "Context Sync",
        "Stream Sync",
        "Event\nSync",
        "fooMemcpy",
        "foo\nMemcpy",
        "fooMemset",
        "Memsetx",
        "dm",
        "",
        "\n",
        "Sync",
        "elementwise_kernel_with_index<int, Sync>",
    ]
    for n in names:
        assert _kernel_type_of(n) == hta(n), n
    # and every name of the real traces, where they are available
    strings = _shared_strings()
    assert [_kernel_type_of(n) for n in strings] == [hta(n) for n in strings]


def _same(a, b) -> bool:
    """Deep equality of analysis results (frozen dataclasses holding numpy arrays, tuples, dicts)."""
    import dataclasses

    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)  # NaN == NaN


def _analyses(t) -> dict:
    from dyno.trace_analysis import analyses as A

    return {
        "temporal": A.temporal_breakdown(t),
        "temporal_nosync": A.temporal_breakdown(t, sync_is_busy=False),
        "idle": A.idle_time_breakdown(t),
        "idle_10": A.idle_time_breakdown(t, consecutive_kernel_delay_us=10.0),
        "kernels": A.kernel_breakdown(t),
        "kernels_1": A.kernel_breakdown(t, top_n=1),
        "overlap": A.comm_comp_overlap(t),
        "launch": A.launch_stats(t),
        "launch_5": A.launch_stats(t, runtime_cutoff_us=5.0, launch_delay_cutoff_us=1.0),
        "queue": A.queue_length(t),
        "memcpy": A.memory_copies(t),
        "steps": A.step_timings(t),
        "cpu_ops": A.cpu_op_summary(t),
        "cpu_ops_2": A.cpu_op_summary(t, top_n=2),
    }


def _fresh(t):
    """The same trace with an empty cache: every analysis computed from scratch."""
    from dyno.trace_analysis.model import Trace

    return Trace(t.meta, t.strings, t.events, t.flows, t.memory, t.instants, t.extra_args)


def _rich_trace(tmp_path, rank: int = 0, slow: float = 1.0):
    from dyno.trace_analysis.loader import load_trace

    b = TraceBuilder(rank=rank)
    for s in range(4):
        t0 = s * 1000.0 * slow
        b.step(s, t0, 900.0 * slow)
        b.cpu("aten::linear", t0 + 5.0, 300.0)
        b.cpu("aten::mm", t0 + 10.0, 100.0)
        b.launch("void gemm_kernel()", t0 + 20.0, t0 + 40.0, 60.0 * slow)
        b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", t0 + 30.0, t0 + 60.0, 80.0, stream=20)
        b.launch("tiny_kernel", t0 + 150.0, t0 + 170.0, 1.0)
        b.memcpy("Memcpy DtoH (Device -> Pageable)", t0 + 400.0, t0 + 420.0, 10.0, 1 << 20)
        b.cpu("aten::item", t0 + 500.0, 40.0)
    return load_trace(b.write(tmp_path / f"rank{rank}.json"))


def test_cached_analyses_equal_a_fresh_computation_and_do_not_leak(tmp_path) -> None:
    from dyno.trace_analysis.analyses import rank_spread

    t0 = _rich_trace(tmp_path, 0)
    t1 = _rich_trace(tmp_path, 1, slow=1.5)
    first = {r: _analyses(t) for r, t in ((0, t0), (1, t1))}
    for r, t in ((0, t0), (1, t1)):
        again = _analyses(t)
        fresh = _analyses(_fresh(t))
        for name, got in first[r].items():
            # the cache answers (kernel and CPU-op tables cache their grouping and build the top_n rows per call)
            assert again[name] is got or (name.startswith(("kernels", "cpu_ops")) and _same(again[name], got)), name
            assert _same(got, fresh[name]), name  # and equals a computation from scratch
    # different traces, different answers (nothing shared between the two caches)
    assert not _same(first[0]["steps"], first[1]["steps"])
    assert first[0]["kernels"].top[0].name == "ncclKernel_AllReduce_RING_LL_Sum_float"
    assert first[1]["kernels"].top[0].total_us != first[0]["kernels"].top[0].total_us
    # the different top_n of one grouping
    assert first[0]["kernels_1"].top == first[0]["kernels"].top[:1]
    assert first[0]["cpu_ops_2"].by_self == first[0]["cpu_ops"].by_self[:2]
    # rank_spread reads cached per-rank figures: same result as on fresh traces
    assert _same(rank_spread([t0, t1]), rank_spread([_fresh(t0), _fresh(t1)]))


def test_cached_arrays_are_read_only(tmp_path) -> None:
    from dyno.trace_analysis import analyses as A

    t = _rich_trace(tmp_path)
    ls, it, ql = A.launch_stats(t), A.idle_time_breakdown(t), A.queue_length(t)
    for arr in (ls.cpu_duration, ls.gpu_row, ls.launch_delay, it.gap_us, it.gap_category, ql.length, ql.ts):
        with pytest.raises(ValueError):
            arr[:1] = 0


def _shared_strings() -> list[str]:
    from dyno.trace_analysis.loader import load_trace

    out: list[str] = []
    for shared in (SHARED_TRACES,):
        for case in ("trace_filter", "nccl_parser_config", "simple_add"):
            for f in sorted((shared / case).glob("*.json*"))[:1]:
                out.extend(load_trace(f).strings)
    return out


def test_gemm_and_tensor_core_word_tests_equal_the_regexes() -> None:
    from dyno.trace_analysis.rules.gpu_work import _GEMM, _GEMM_WORDS, _TENSOR_CORE, _TENSOR_CORE_WORDS, _has_word

    names = [
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>(Params)",
        "volta_sgemm_128x64_nn",
        "CUTLASS_GEMM",
        "sm80_xmma_fprop_implicit_gemm_tf32f32",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
        "Conv2D",
        "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_64x3_nn",
        "GeMm\u212a",  # Kelvin sign: re.I folds it to k; non-ASCII names take the regex path
        "cutla\u017fs",  # long s: re.I folds it to s
        "",
        "BF16_kernel",
    ]
    # the rule's original patterns
    assert _GEMM.pattern == "gemm|conv|cutlass|cublas|matmul|fprop|dgrad|wgrad"
    assert _TENSOR_CORE.pattern == (
        "884|1688|16816|161616|s1688|h1688|i8816|xmma|hmma|wgmma|gmma|imma|tensorop|tf32|bf16|f16|fp16"
    )
    names += _shared_strings()
    for n in names:
        assert _has_word(n, _GEMM_WORDS, _GEMM) == (_GEMM.search(n) is not None), n
        assert _has_word(n, _TENSOR_CORE_WORDS, _TENSOR_CORE) == (_TENSOR_CORE.search(n) is not None), n


def test_events_of_equals_an_isin_filter(tmp_path) -> None:
    from dyno.trace_analysis.model import GPU_ACTIVITY_CATS, GPU_CATS, Cat

    t = _rich_trace(tmp_path)
    for cats in [(Cat.KERNEL,), GPU_ACTIVITY_CATS, GPU_CATS, (Cat.CPU_OP, Cat.USER_ANNOTATION), tuple(Cat)]:
        want = np.flatnonzero(np.isin(t.events.cat, np.array(cats, dtype=np.int8)))
        got = t.events_of(*cats)
        assert got.index.tolist() == want.tolist()
        assert t.events_of(*reversed(cats)) is got  # cached, in any order


def _launch_rows_reference(trace, gpu) -> np.ndarray:
    """launch_rows as it was before the per-trace correlation index: a full scan of trace.events per call."""
    from dyno.trace_analysis.model import Cat

    ev = trace.events
    cpu_rows = np.flatnonzero(((ev.cat == Cat.CUDA_RUNTIME) | (ev.cat == Cat.CUDA_DRIVER)) & (ev.correlation >= 0))
    if not len(cpu_rows) or not len(gpu):
        return np.full(len(gpu), -1, dtype=np.int64)
    corr = ev.correlation[cpu_rows]
    order = np.argsort(corr, kind="stable")
    pos = np.minimum(np.searchsorted(corr[order], gpu.correlation), len(order) - 1)
    hit = (corr[order][pos] == gpu.correlation) & (gpu.correlation >= 0)
    return np.where(hit, cpu_rows[order[pos]], -1)


def test_launch_rows_and_device_busy_equal_fresh_computations(tmp_path) -> None:
    from dyno.trace_analysis.analyses.gpu import launch_rows
    from dyno.trace_analysis.analyses.intervals import merge
    from dyno.trace_analysis.loader import load_trace
    from dyno.trace_analysis.model import GPU_CATS, Cat
    from dyno.trace_analysis.rules import RuleContext

    traces = [_rich_trace(tmp_path)]
    for shared in (SHARED_TRACES,):
        traces += [load_trace(f) for f in sorted((shared / "trace_filter").glob("*.json*"))]
    for t in traces:
        for gpu in (t.events_of(*GPU_CATS), t.events_of(Cat.GPU_MEMCPY), t.events.take(np.arange(0))):
            assert np.array_equal(launch_rows(t, gpu), _launch_rows_reference(t, gpu))
        ctx = RuleContext(t)
        g = ctx.gpu_activity
        dev = ctx.gpu_device_of(g)
        assert sorted(ctx.device_busy) == sorted(set(dev.tolist()))
        for d, (s, e, first, last) in ctx.device_busy.items():
            ws, we = merge(g.ts[dev == d], g.end[dev == d])
            assert np.array_equal(s, ws) and np.array_equal(e, we)
            assert (first, last) == (float(g.ts[dev == d].min()), float(g.end[dev == d].max()))


def _parents_reference(ev) -> np.ndarray:
    """cpu_ops.parents before the O(n) run bounds and the radix depth sort (kept verbatim as the reference)."""
    n = len(ev)
    parent = np.full(n, -1, dtype=np.int64)
    if not n:
        return parent
    order = np.lexsort((-ev.dur, ev.ts, ev.tid, ev.pid))
    pid, tid, ts, end = ev.pid[order], ev.tid[order], ev.ts[order], (ev.ts + ev.dur)[order]
    bounds = np.flatnonzero((np.diff(pid) != 0) | (np.diff(tid) != 0)) + 1
    for a, b in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [n])), strict=True):
        s, e = ts[a:b], end[a:b]
        m = b - a
        idx = np.arange(m)
        closed = np.searchsorted(np.sort(e), s, side="right")
        zero = np.concatenate(([0], np.cumsum(e <= s)))
        hi = np.searchsorted(s, s, side="right")
        lo = np.searchsorted(s, s, side="left")
        z = hi - (zero[hi] - zero[lo])
        closed -= hi - np.maximum(idx, z)
        depth = np.maximum(idx - closed, 0)
        key = depth.astype(np.int64) * (m + 1) + np.arange(m)
        korder = np.argsort(key, kind="stable")
        ksorted = key[korder]
        want = (depth - 1) * (m + 1) + np.arange(m)
        pos = np.searchsorted(ksorted, want, side="left") - 1
        ok = (depth > 0) & (pos >= 0)
        cand = np.where(ok, korder[np.maximum(pos, 0)], -1)
        ok &= np.where(cand >= 0, depth[np.maximum(cand, 0)] == depth - 1, False)
        parent[order[a:b][ok]] = order[a:b][cand[ok]]
    return parent


@pytest.mark.parametrize("seed", range(12))
def test_parents_equal_the_reference_on_random_intervals(seed: int) -> None:
    from dyno.trace_analysis.analyses.cpu_ops import parents
    from dyno.trace_analysis.model import Events

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # coarse integer times: many equal starts, zero-length rows, touching and partly overlapping rows
    ts = rng.integers(0, 60, size=n).astype(np.float64)
    dur = rng.choice([0.0, 0.0, 1.0, 2.0, 5.0, 20.0, 100.0], size=n)
    if seed % 3 == 0:
        ts[rng.integers(0, n, size=max(n // 20, 1))] = np.nan  # NaN starts take the binary-search path
    ev = Events.from_columns(
        {
            "ts": ts,
            "dur": dur,
            "tid": rng.integers(0, 3, size=n),
            "pid": rng.integers(0, 2, size=n),
            "name": np.zeros(n),
        }
    )
    assert np.array_equal(parents(ev), _parents_reference(ev))


def test_parents_equal_the_reference_on_shared_traces() -> None:
    from dyno.trace_analysis.analyses.cpu_ops import parents
    from dyno.trace_analysis.loader import load_trace
    from dyno.trace_analysis.model import Cat

    for shared in (SHARED_TRACES,):
        for case in ("trace_filter", "simple_add"):
            for f in sorted((shared / case).glob("*.json*"))[:1]:
                t = load_trace(f)
                for ev in (t.events_of(Cat.CPU_OP), t.events_of(Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.CUDA_RUNTIME)):
                    assert np.array_equal(parents(ev), _parents_reference(ev))


def _group_reference(names: np.ndarray, dur: np.ndarray) -> tuple:
    """group_rows_by_name before the bincount ids and the count-based bounds (verbatim reference)."""
    ids, inv = np.unique(names, return_inverse=True)
    count = np.bincount(inv, minlength=len(ids))
    total = np.bincount(inv, weights=dur, minlength=len(ids))
    order = np.lexsort((dur, inv))
    first = np.searchsorted(inv[order], np.arange(len(ids)), side="left")
    last = np.searchsorted(inv[order], np.arange(len(ids)), side="right") - 1
    return ids, inv, count, total, dur[order][first], dur[order][last], order[last]


@pytest.mark.parametrize("seed", range(8))
def test_group_rows_by_name_equals_the_reference(seed: int) -> None:
    from dyno.trace_analysis.analyses.kernels import group_rows_by_name

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 500))
    names = rng.integers(-1 if seed % 4 == 0 else 0, 40, size=n).astype(np.int32)
    dur = rng.choice([0.0, 1.0, 2.5, 7.0, 100.0], size=n)
    got, want = group_rows_by_name(names, dur), _group_reference(names, dur)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("seed", range(10))
def test_thread_time_order_equals_lexsort(seed: int) -> None:
    from dyno.trace_analysis.analyses.cpu_ops import _thread_time_order
    from dyno.trace_analysis.model import Events

    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 600))
    ts = np.sort(rng.integers(0, 80, size=n).astype(np.float64))  # tables are sorted by ts: many ties
    if seed % 2:
        ts = rng.permutation(ts)  # and unsorted tables still get lexsort's order
    if seed % 5 == 0:
        ts[rng.integers(0, n)] = np.nan
    dur = rng.choice([0.0, -0.0, 1.0, 3.0, 3.0, 50.0, np.nan if seed % 3 == 0 else 2.0], size=n)
    cols = {"ts": ts, "dur": dur, "tid": rng.integers(-2, 3, size=n), "pid": rng.integers(0, 2, size=n)}
    ev = Events(**{k: np.asarray(v) for k, v in cols.items()}, **_other_columns(n))
    want = np.lexsort((-ev.dur, ev.ts, ev.tid, ev.pid))
    assert np.array_equal(_thread_time_order(ev), want)


def _other_columns(n: int) -> dict:
    from dyno.trace_analysis.model import EVENT_DTYPES

    return {k: np.full(n, -1, dtype=t) for k, t in EVENT_DTYPES.items() if k not in ("ts", "dur", "tid", "pid")}
