"""The agent counts torch profiler starts to see a profiler the program starts during a trace (stopping "ours" then
ended the program's session, whose export crashed the trainer). Torch counts our own start at the top of its
__enter__, before kineto is enabled (which takes a while); a start by the program's thread in that time was taken
as part of ours, and the trace then stopped the program's session after all. A fake torch makes the timing exact."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from dyno.client.agent.profiler import Profiler
from dyno.client.agent.spec import TraceFailed, TraceSpec

pytestmark = pytest.mark.unit


def _fake_torch(program_starts_during_enter: int) -> tuple[Any, list[str]]:
    calls: list[str] = []
    profiler = types.SimpleNamespace(_is_profiler_enabled=False)

    def run_on_profiler_start() -> None:
        profiler._is_profiler_enabled = True

    class Profile:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Profile:
            profiler._run_on_profiler_start()  # looked up at call time, as torch does
            for _ in range(program_starts_during_enter):  # the program's thread, while kineto is being enabled
                profiler._run_on_profiler_start()
            calls.append("enter")
            return self

        def __exit__(self, *exc: object) -> None:
            calls.append("exit")

    profiler._run_on_profiler_start = run_on_profiler_start
    profiler.profile = Profile
    torch = types.SimpleNamespace(
        autograd=types.SimpleNamespace(profiler=profiler, _add_metadata_json=lambda *a: None),
        cuda=types.SimpleNamespace(is_available=lambda: False),
    )
    return torch, calls


def _spec(tmp_path: Path) -> TraceSpec:
    return TraceSpec(trace_id="t-race", output_path=tmp_path / "a.pt.trace.json.gz", duration_ms=10)


def test_a_program_start_during_our_enter_is_a_takeover(tmp_path: Path) -> None:
    torch, calls = _fake_torch(program_starts_during_enter=1)
    prof = Profiler(torch, _spec(tmp_path), all_threads=False)
    prof.start()
    with pytest.raises(TraceFailed, match="started its own torch profiler"):
        prof.stop()
    assert calls == ["enter"]  # the program's session is not stopped


def test_our_start_alone_is_no_takeover(tmp_path: Path) -> None:
    torch, calls = _fake_torch(program_starts_during_enter=0)
    prof = Profiler(torch, _spec(tmp_path), all_threads=False)
    prof.start()
    prof.stop()
    assert calls == ["enter", "exit"]
