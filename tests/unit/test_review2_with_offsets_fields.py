"""``rules.engine.with_offsets`` rebuilds Example, Evidence and Finding with positional constructor calls (for
speed). A field added later with a default would be silently dropped there, and test_reportux_with_offsets (which
builds its findings from today's fields) would still pass: this guard fails instead, naming what to update."""

from __future__ import annotations

from dataclasses import fields

import pytest

from dyno.trace_analysis.rules.base import Evidence, Example, Finding

pytestmark = pytest.mark.unit

# the fields with_offsets passes, in its argument order
PASSED = {
    Example: ["name", "ts_us", "dur_us", "where", "offset_us", "note"],
    Evidence: [
        "time_lost_us",
        "share",
        "counts",
        "examples",
        "share_of",
        "time_lost_basis",
        "no_time_lost_reason",
    ],
    Finding: ["rule_id", "severity", "title", "evidence", "fix", "rank"],
}


@pytest.mark.parametrize("cls", list(PASSED), ids=lambda c: c.__name__)
def test_with_offsets_passes_every_field_in_order(cls: type) -> None:
    assert [f.name for f in fields(cls)] == PASSED[cls], f"update rules.engine.with_offsets for {cls.__name__}"
