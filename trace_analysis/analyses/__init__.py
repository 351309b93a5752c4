"""trace_analysis.analyses"""
