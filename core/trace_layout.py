"""Where trace files live under the daemon's trace dir: the names dynod gives a trace's folder and files, shared by
the daemon (which makes them) and the client and agent (which write, fetch and recognise them).

Every path is derived from the daemon's trace dir, a validated trace id, the host name and a pid: a remote request
never names a path.
"""

from __future__ import annotations

import re
from pathlib import Path

from dyno.trace_ids import safe_host

__all__ = [
    "AGENT_SUFFIX",
    "agent_raw",
    "agent_tmp",
    "FILE_NAME_RE",
    "KINETO_SUFFIX",
    "MARKER_NAME",
    "RECORD_NAME",
    "agent_output",
    "agent_temporaries",
    "kineto_log_file",
    "kineto_output",
    "kineto_tmp",
    "reported_agent_output",
]

KINETO_SUFFIX = ".pt.trace.json"
AGENT_SUFFIX = ".pt.trace.json.gz"


def kineto_log_file(trace_dir: Path, trace_id: str, hostname: str) -> Path:
    """What ACTIVITIES_LOG_FILE says; libkineto writes it with `_<pid>` inserted before `.pt.trace.json`."""
    return trace_dir / trace_id / f"{safe_host(hostname)}{KINETO_SUFFIX}"


def kineto_output(trace_dir: Path, trace_id: str, hostname: str, pid: int) -> Path:
    return trace_dir / trace_id / f"{safe_host(hostname)}_{pid}{KINETO_SUFFIX}"


def kineto_tmp(output: Path) -> Path:
    """What libkineto writes a trace to before it renames it to `output` (also when the profiler is the agent's)."""
    return Path(str(output) + ".tmp")


def agent_output(trace_dir: Path, trace_id: str, hostname: str, pid: int) -> Path:
    return trace_dir / trace_id / f"{safe_host(hostname)}_{pid}{AGENT_SUFFIX}"


# A trace file's base name as the daemon makes them (kineto_output, agent_output), under any host name
FILE_NAME_RE = re.compile(
    r"\A[A-Za-z0-9_.-]{1,255}_(?P<pid>[0-9]{1,10})(?P<suffix>"
    + re.escape(KINETO_SUFFIX)
    + "|"
    + re.escape(AGENT_SUFFIX)
    + r")\Z"
)


def reported_agent_output(trace_dir: Path, trace_id: str, pid: int, reported: str) -> Path | None:
    """The path an agent reported its file at, when it is where a daemon names that pid's agent file in the trace's
    folder, whatever the host name in it (the daemon that gave the agent its path ran under the host name of
    then: dynod may have restarted since, after a host name change); else None. Lexically: no "..", no other
    folder, nothing but the daemon's naming."""
    path = Path(reported)
    m = FILE_NAME_RE.match(path.name)
    if not reported or path.parent != trace_dir / trace_id or m is None or m.group("suffix") != AGENT_SUFFIX:
        return None
    return path if int(m.group("pid")) == pid else None


# In every folder dynod makes for a trace, before anyone else can write there (daemon/tracing/trust.py checks it)
MARKER_NAME = ".dynod-trace"
# A trace's record, written into its folder (daemon/tracing/journal.py)
RECORD_NAME = "dynod-record.json"


def agent_raw(output: Path) -> Path:
    """Where the agent's profiler exports its JSON for the trace file `output`."""
    return output.with_name(output.name + ".raw.tmp")


def agent_tmp(output: Path) -> Path:
    """The agent's compressed copy being written, renamed to `output` when complete."""
    return output.with_name(output.name + ".tmp")


def agent_temporaries(output: Path) -> tuple[Path, ...]:
    """Every temporary file an agent trace may leave: the raw export, libkineto's own temp file of it, the copy."""
    raw = agent_raw(output)
    return (raw, kineto_tmp(raw), agent_tmp(output))
