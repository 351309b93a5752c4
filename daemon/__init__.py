"""dynod: the per-host daemon (samplers, history, process registry, trace manager, gRPC and Prometheus servers)."""
