"""dyno-cli analyze: the trace_analysis report for trace files or folders of ranks (no daemon needed)."""

from __future__ import annotations

import argparse

from dyno.trace_analysis.cli import add_analyze_arguments, run_analyze


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help="analyze PyTorch/Kineto traces: breakdowns and antipatterns",
        description="Load PyTorch profiler / Kineto traces (plain or gzip JSON; a folder is one job's ranks), "
        "compute HTA-style breakdowns and cross-rank figures, run the antipattern rules, and print a report "
        "sorted by time lost (--json for tooling, --html FILE for a standalone report).",
    )
    add_analyze_arguments(p)
    p.set_defaults(func=run_analyze)
