"""with_offsets places a finding's examples on its rank's timeline and keeps every other field."""

from __future__ import annotations

import pytest
from msgspec.structs import fields, replace

from dyno.trace_analysis.rules.base import Evidence, Example, Finding, Severity
from dyno.trace_analysis.rules.engine import with_offsets

pytestmark = pytest.mark.unit


def _finding(offset: float | None) -> Finding:
    ex = Example("k", 1_000.0, 5.0, "stream 7", offset, note="host tid 1: x 1 µs (100%)")
    ev = Evidence(12.0, 0.5, {"n": 1}, (ex,), "GPU span", "basis", "reason")
    return Finding("host-bound", Severity.HIGH, "title", ev, "fix", rank=3)


def test_every_field_is_kept_and_the_offset_set() -> None:
    got = with_offsets(_finding(None), 400.0)
    want = _finding(600.0)
    assert got == want
    for cls, a, b in ((Finding, got, want), (Evidence, got.evidence, want.evidence)):
        assert all(getattr(a, f.name) == getattr(b, f.name) for f in fields(cls))
    assert got.evidence.examples[0] == replace(_finding(None).evidence.examples[0], offset_us=600.0)


def test_placed_examples_are_left_alone() -> None:
    f = _finding(5.0)
    assert with_offsets(f, 400.0) is f
