"""Samplers: one module per source behind the Sampler protocol of dyno.daemon.samplers.base."""
