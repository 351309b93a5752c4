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
