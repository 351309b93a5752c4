"""A dynod process's instance id: new at each start, so that a client recognises a restarted daemon (GetStatus,
StartTrace and GetTrace carry it) by comparing ids instead of parsing its messages."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_instance_id"]


def new_instance_id(now_s: float | None = None) -> str:
    """ "<UTC start time>-<12 random hex digits>", e.g. "20261201T101500Z-3f9c0a1b2c4d": the time for people reading
    logs, the random part so that two starts within a second (or with the clock set back) never share one."""
    t = time.time() if now_s is None else now_s
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(t))}-{secrets.token_hex(6)}"
