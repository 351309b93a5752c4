"""Fixtures shared by the trace_analysis tests."""

from __future__ import annotations

from pathlib import Path

import pytest

# Both trace decoders: the native one (trace_analysis/_native.c) and the Python ones; they must agree.
PARSERS = [pytest.param("1", id="native"), pytest.param("0", id="python")]


@pytest.fixture(params=PARSERS)
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once with each decoder (DYNO_NATIVE_PARSE)."""
    monkeypatch.setenv("DYNO_NATIVE_PARSE", request.param)
    return str(request.param)


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real torch.profiler CPU traces ("bad", "good": analysis_trace_builder.torch_cpu_traces), made once a session."""
    pytest.importorskip("torch")
    from analysis_trace_builder import torch_cpu_traces

    return torch_cpu_traces(tmp_path_factory.mktemp("torch_cpu_traces"))
