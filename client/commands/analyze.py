"""dyno-cli analyze: the trace_analysis report for trace files or folders of ranks (no daemon needed)."""

from __future__ import annotations

import argparse

from dyno.client.commands._catalog import COMMANDS
from dyno.trace_analysis.cli import DESCRIPTION, add_analyze_arguments, run_analyze


def register(sub: argparse._SubParsersAction) -> None:
    # the description of `python -m dyno.trace_analysis` (a copy here said "sorted by time lost", not by severity)
    p = sub.add_parser("analyze", help=COMMANDS["analyze"], description=DESCRIPTION)
    add_analyze_arguments(p)
    p.set_defaults(func=run_analyze)
