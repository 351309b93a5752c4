"""JSON report (schema ``dyno.trace_analysis.report`` version 2, docs/ANALYSIS_REPORT.md).

Indented up to ``model.RANK_THRESHOLD`` ranks; past it one line (the same document: a 1,024-rank report was
42.7 MB indented, 30.5 MB without, and read by tools, not people). JSON has no NaN/Infinity: orjson writes null for
them (numpy's included), and non-string keys as strings, so any consumer can parse the document."""

from __future__ import annotations

import orjson

from .model import RANK_THRESHOLD, Report

__all__ = ["render_json"]


def render_json(report: Report, *, indent: bool | None = None) -> str:
    """``indent``: None indents up to ``RANK_THRESHOLD`` ranks."""
    if indent is None:
        indent = len(report.ranks) <= RANK_THRESHOLD
    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(report.to_dict(), option=opts).decode() + "\n"
