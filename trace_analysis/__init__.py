"""trace_analysis: load PyTorch/Kineto traces, compute breakdowns, detect antipatterns, report.

Library use: ``dyno.trace_analysis.analyze(paths, rules=None, thresholds=None) -> Report``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import AnalysisError, analyze

__all__ = ["AnalysisError", "analyze"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: importing a submodule (the CLI's argument definitions) must not load numpy and the
    # whole analysis stack with it.
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
