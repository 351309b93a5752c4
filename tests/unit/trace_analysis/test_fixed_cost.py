"""Fixed-cost helpers of the analyses and rules that replace slow numpy first calls or regexes: each gives exactly
the values of numpy or of the reference it replaces.
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
