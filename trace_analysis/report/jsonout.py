"""JSON report (schema ``dyno.trace_analysis.report`` version 2, docs/ANALYSIS_REPORT.md)."""

from __future__ import annotations

import math

import orjson

from .model import Report

__all__ = ["render_json"]


def _clean(v: object) -> object:
    # JSON has no NaN/Infinity: write null so any consumer can parse the document
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def render_json(report: Report, *, indent: bool = True) -> str:
    opts = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(_clean(report.to_dict()), option=opts).decode() + "\n"
