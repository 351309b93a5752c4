"""The partial files of FetchTraceFile streams (DynoClient.fetch_trace_file): where one is written while it arrives,
and how those left by a dyno-cli killed mid-fetch are found and removed."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from dyno.trace_ids import safe_host

__all__ = ["part_path", "remove_stale_parts"]


def part_path(dest: Path, trace_id: str, pid: int) -> Path:
    """This run's partial file of (trace_id, pid) in `dest`: `.TRACE.PID.CLIPID@CLIHOST.part`. The host, because an
    output dir on a shared filesystem (an NFS home) is written by dyno-cli runs on other login nodes too, whose pids
    say nothing here: remove_stale_parts removed a fetch in progress there, whose file then failed to arrive."""
    return dest / f".{trace_id}.{pid}.{os.getpid()}@{safe_host(socket.gethostname())}.part"


def remove_stale_parts(dest: Path, trace_id: str, pid: int) -> None:
    """Remove the partial files of (trace_id, pid) in `dest` left by a dyno-cli of this host killed mid-fetch
    (SIGKILL, a lost session): those (part_path) whose CLIPID runs no more. Fetching the file again is how such a
    run is recovered, and the partials stayed, hidden and as large as what had arrived. Best effort."""
    prefix = f".{trace_id}.{pid}."
    try:
        names = [e.name for e in os.scandir(dest) if e.name.startswith(prefix) and e.name.endswith(".part")]
    except OSError:
        return
    here = safe_host(socket.gethostname())
    for name in names:
        # "CLIPID@CLIHOST"; a bare CLIPID is of the version before hosts were named: taken as this host's
        owner, _, host = name[len(prefix) : -len(".part")].partition("@")
        if host not in ("", here):
            continue
        if owner.isdigit() and int(owner) != os.getpid() and not _running(int(owner)):
            try:
                os.unlink(dest / name)
            except OSError:
                pass


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): it runs
        return True
    return True
