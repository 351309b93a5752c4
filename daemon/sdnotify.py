"""Minimal sd_notify(3): tells systemd (Type=notify) that dynod is ready or stopping. No-op outside systemd."""

from __future__ import annotations

import os
import socket

__all__ = ["notify"]


def notify(state: str, env: dict[str, str] | None = None) -> bool:
    """Send e.g. "READY=1" to $NOTIFY_SOCKET; returns whether a message was sent."""
    addr = (env if env is not None else os.environ).get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            s.sendall(state.encode())
        return True
    except OSError:
        return False
