"""trace_analysis: load PyTorch/Kineto traces, compute breakdowns, detect antipatterns, report."""
