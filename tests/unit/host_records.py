"""Cluster-trace host records built by hand, for the tests of what reads them (exit codes, manifest, progress)."""

from __future__ import annotations

from dyno.client.hosts import Host
from dyno.client.trace.records import HostRecord, ProcRecord, host_dir_name


def host_record(name: str, state: str, *procs: ProcRecord, error: str = "") -> HostRecord:
    """Host `name` (port 1778) in `state`, with `procs` matched."""
    h = HostRecord(Host(name), host_dir_name(Host(name)), state=state, error=error)
    h.processes = list(procs)
    h.matched_pids = [p.pid for p in procs]
    return h


def fetched_proc(pid: int) -> ProcRecord:
    """A done process of rank `pid` whose 10-byte file arrived."""
    return ProcRecord(pid, rank=pid, state="done", fetch="fetched", file=f"x/{pid}.json", fetched_bytes=10)
