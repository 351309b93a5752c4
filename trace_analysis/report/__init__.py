"""trace_analysis.report"""
