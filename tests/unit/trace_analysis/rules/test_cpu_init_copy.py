"""cpu-init-copy on traces recorded with with_stack=True: the python_function row that encloses each aten::to
(`<built-in method to of Tensor object ...>`) is not the op before it; the previous *operator* on the thread is."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _stack_trace(tmp_path: Path, init: str) -> Path:
    b = TraceBuilder()
    b.step(1, 0.0, 100.0)
    b.cpu("train.py(12): step", 1.0, 90.0, cat="python_function")
    b.cpu(f"<built-in method {init} of type object at 0x7f>", 2.0, 10.0, cat="python_function")
    b.cpu(f"aten::{init}", 3.0, 8.0)
    b.cpu("<built-in method to of Tensor object at 0x7f>", 20.0, 30.0, cat="python_function")
    b.cpu("aten::to", 21.0, 28.0)
    b.cpu("aten::_to_copy", 22.0, 26.0)
    return b.write(tmp_path / "stack.json")


def test_init_then_to_is_found_under_python_function_rows(tmp_path: Path) -> None:
    (f,) = analyze([_stack_trace(tmp_path, "zeros")], rules=["cpu-init-copy"]).findings_of("cpu-init-copy")
    assert f.evidence.counts["copies"] == 1 and f.evidence.examples[0].name == "aten::to"


def test_to_after_a_non_initializer_is_not_found_under_python_function_rows(tmp_path: Path) -> None:
    report = analyze([_stack_trace(tmp_path, "relu")], rules=["cpu-init-copy"])
    assert report.findings_of("cpu-init-copy") == []


def _torch_trace(path: Path, bad: bool) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            if bad:
                t = torch.zeros(8, 8)
                t.fill_(1.0)
                t.to(torch.float64)
            else:
                torch.full((8, 8), 1.0, dtype=torch.float64)
    prof.export_chrome_trace(str(path))
    return path


@pytest.mark.torch
def test_real_with_stack_trace(tmp_path: Path) -> None:
    bad = analyze([_torch_trace(tmp_path / "bad.json", True)], rules=["cpu-init-copy"])
    (f,) = bad.findings_of("cpu-init-copy")
    assert f.evidence.counts["copies"] == 3
    good = analyze([_torch_trace(tmp_path / "good.json", False)], rules=["cpu-init-copy"])
    assert good.findings_of("cpu-init-copy") == []
