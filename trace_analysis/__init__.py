"""trace_analysis: load PyTorch/Kineto traces, compute breakdowns, detect antipatterns, report.

Library use: ``dyno.trace_analysis.analyze(paths, rules=None, thresholds=None) -> Report``.
"""

from .api import AnalysisError, analyze

__all__ = ["AnalysisError", "analyze"]
