"""trace_analysis.rules"""
