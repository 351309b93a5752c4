"""Load drivers of bench/registry_scale.py: each runs as a process of its own (its own GIL), started by that script."""
