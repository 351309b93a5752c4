"""Fixtures shared by the trace_analysis tests."""

from __future__ import annotations

import pytest

# Both trace decoders: the native one (trace_analysis/_native.c) and the Python ones; they must agree.
PARSERS = [pytest.param("1", id="native"), pytest.param("0", id="python")]


@pytest.fixture(params=PARSERS)
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once with each decoder (DYNO_NATIVE_PARSE)."""
    monkeypatch.setenv("DYNO_NATIVE_PARSE", request.param)
    return str(request.param)
