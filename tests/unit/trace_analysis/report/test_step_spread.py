"""The terminal report's line of step times across ranks: the ranks' mean steps side by side, with the slowest and
fastest named; none for one rank, or for ranks without steps."""

from __future__ import annotations

from pathlib import Path

import pytest
from multirank_jobs import cpu_job

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_text

pytestmark = pytest.mark.unit


def test_the_ranks_step_times_side_by_side(tmp_path: Path) -> None:
    text = render_text(analyze(cpu_job(tmp_path, [100_000, 101_000, 99_500, 160_000]), workers=1), width=0)
    line = next(line for line in text.splitlines() if line.startswith("step time across"))
    # means 99.5, 100, 101, 160 ms: median (100 + 101) / 2
    assert line == (
        "step time across 4 ranks: median 100.5 ms, fastest 99.5 ms (rank 2), slowest 160.0 ms (rank 3), "
        "spread 60.2% of the median"
    )


def test_one_rank_has_no_such_line(tmp_path: Path) -> None:
    cpu_job(tmp_path, [100_000])
    assert "step time across" not in render_text(analyze(tmp_path, workers=1))
