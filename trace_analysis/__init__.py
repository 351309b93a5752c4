"""trace_analysis: load PyTorch/Kineto traces, compute breakdowns, detect antipatterns, report.

Library use: ``dyno.trace_analysis.analyze(paths, rules=None, thresholds=None) -> Report``; it raises
``ThresholdError`` / ``UnknownRuleError`` (both ``ValueError``) for bad thresholds or rule ids and
``AnalysisError`` when no trace loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dyno.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from .api import AnalysisError, analyze
    from .report import Report
    from .rules import ThresholdError, UnknownRuleError

__all__ = ["AnalysisError", "Report", "ThresholdError", "UnknownRuleError", "analyze"]

# the submodule that defines each public name
_HOME = {
    "AnalysisError": "api",
    "analyze": "api",
    "Report": "report",
    "ThresholdError": "rules",
    "UnknownRuleError": "rules",
}
# Loaded on first use: importing a submodule (the CLI's argument definitions) must not load numpy and the whole
# analysis stack with it.
__getattr__ = lazy_getattr(__name__, _HOME)
