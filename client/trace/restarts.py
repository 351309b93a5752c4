"""Whether a host's daemon restarted mid-trace, for ClusterTrace: the instance id of the daemon that last answered
about the trace on each host (a dynod takes a new one at each start, never reused), and, where ids cannot tell, a
NOT_FOUND that names the restart."""

from __future__ import annotations

import threading

from dyno.client.client import DynoClient
from dyno.client.errors import DynoError, NotFound
from dyno.client.reasons import is_reason
from dyno.error_reasons import ErrorReason

__all__ = ["DaemonInstances", "restarted_text"]


class DaemonInstances:
    """By host dir: the instance id of the daemon that last answered about the trace ("" from daemons before ids),
    and the hosts whose daemon was seen restarted (ids are never reused: it stays restarted). Thread-safe; its lock
    is taken last (ClusterTrace records answers here while holding its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}
        self._restarted: set[str] = set()

    def set(self, host_dir: str, instance_id: str) -> None:
        """The instance id of the daemon that started the trace, or answered attach() or the start's confirmation."""
        with self._lock:
            self._ids[host_dir] = instance_id

    def note(self, host_dir: str, instance_id: str) -> bool:
        """Note the instance id of the daemon that answered about the trace; True when it is another than the one
        before (the daemon restarted). "" (a daemon before instance ids) tells nothing."""
        with self._lock:
            known = self._ids.get(host_dir, "")
            if instance_id:
                self._ids[host_dir] = instance_id
            if known and instance_id and known != instance_id:
                self._restarted.add(host_dir)
                return True
        return False

    def restarted_mid_trace(self, client: DynoClient, host_dir: str, e: DynoError) -> bool:
        """Whether a NOT_FOUND for the trace comes from a daemon that restarted since it knew the trace: its
        instance id (GetStatus) is not the one that started it or last answered about it. Without ids to compare
        (a daemon before them, or its status unreadable), the restart its message names (restarted_text)."""
        if not isinstance(e, NotFound):
            return False
        with self._lock:
            known, seen = self._ids.get(host_dir, ""), host_dir in self._restarted
        if seen:
            return True
        if known:
            try:
                now = client.status().instance_id
            except DynoError:
                now = ""
            if now:
                return self.note(host_dir, now)
        return restarted_text(e.reason)


def restarted_text(reason: str) -> bool:
    """Whether a daemon's NOT_FOUND says it restarted (TRACE_FORGOTTEN: it still has the trace's folder). Only where
    instance ids cannot tell (DaemonInstances.restarted_mid_trace), and for ClusterTrace.attach(), which has no
    earlier id to compare with."""
    return is_reason(reason, ErrorReason.TRACE_FORGOTTEN)
