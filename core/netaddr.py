"""host:port text for gRPC targets and listen addresses, with IPv6 literals in brackets ("[::1]:1778")."""

from __future__ import annotations

__all__ = ["host_port"]


def host_port(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"
