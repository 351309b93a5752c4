"""Per-trace caches of the analyses and rules: cached intermediates equal a fresh computation, are read-only and
never leak from one trace to another.
"""

from __future__ import annotations

import numpy as np
import pytest
from analysis_trace_builder import TraceBuilder

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit


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


def _same(a, b) -> bool:
    """Deep equality of analysis results (frozen msgspec Structs holding numpy arrays, tuples, dicts)."""
    import msgspec

    if isinstance(a, msgspec.Struct):
        return type(a) is type(b) and all(_same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
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


def test_events_of_equals_an_isin_filter(tmp_path) -> None:
    from dyno.trace_analysis.model import GPU_ACTIVITY_CATS, GPU_CATS, Cat

    t = _rich_trace(tmp_path)
    for cats in [(Cat.KERNEL,), GPU_ACTIVITY_CATS, GPU_CATS, (Cat.CPU_OP, Cat.USER_ANNOTATION), tuple(Cat)]:
        want = np.flatnonzero(np.isin(t.events.cat, np.array(cats, dtype=np.int8)))
        got = t.events_of(*cats)
        assert got.index.tolist() == want.tolist()
        assert t.events_of(*reversed(cats)) is got  # cached, in any order


def _launch_rows_reference(trace, gpu) -> np.ndarray:
    """launch_rows without the per-trace correlation index: a full scan of trace.events per call."""
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
