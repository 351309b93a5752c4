"""Periodic profiling: each running job traced at moments derived from its job id (docs/PERIODIC.md)."""
