"""The tracing subsystem of dynod: trace requests, their per-process states, the agent and libkineto sides, trace
files on disk, and the Dyno tracing RPCs (service.py). subsystem.Tracing assembles it."""
