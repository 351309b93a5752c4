"""The record a trace leaves in its folder, so that it stays fetchable after dynod restarts.

Whenever one of a trace's processes reaches a final state, the trace manager (re)writes `<trace-dir>/<trace_id>/
dynod-record.json` (temp name, then rename): the request, when it was created, whether the trace is finished, and
per process its state (final, or as it was then for the others), reason, file name, size and user. After a
restart, a GetTrace / FetchTraceFile for an id the daemon does not know, or an agent's report of it, loads that
record (`load_record`) instead of answering NOT_FOUND: a finished trace as it was, an unfinished one with what its
processes had reported by then (the trace manager resumes the rest: table.TraceTable._resume). Retention
deletes it with the folder.

The request's `periodic` flag and each process's `running_ms` (when its profiler started) are kept too, so that a
restarted dynod's periodic profiling counts the time its earlier periodic traces held processes under the profiler
(dyno.daemon.profiling.resume). Both are optional when read back: a record written before them loads as an
on-demand trace whose processes' start is not known.

A record is untrusted input when it is read back: the per-trace folders are writable by trainers of any user
(mode 1733), so anyone on the host could plant or hard-link a file there. It is believed only when it is a plain
file (O_NOFOLLOW, one link) owned by the daemon's own user (the sticky bit keeps others from replacing the
daemon's file), at most MAX_RECORD_BYTES, well-formed in every field, and names only files inside its own folder
that follow the daemon's naming. Anything else is ignored with a WARNING and the trace stays unknown.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO
from dyno.daemon.tracing.trust import open_trace_file, trace_dir_problem, write_file_atomically
from dyno.daemon.tracing.values import FINAL_STATES, ProcessTraceView, TraceReason, TraceSpec, TraceState, TraceView
from dyno.logthrottle import ThrottledLog
from dyno.trace_ids import is_trace_id, validate_trace_id
from dyno.trace_layout import FILE_NAME_RE, RECORD_NAME
from dyno.trace_options import PROFILER_FLAGS

__all__ = [
    "RECORD_NAME",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_PROCESSES",
    "RecordError",
    "forgotten_trace_hint",
    "write_record",
    "load_record",
]

log = logging.getLogger(__name__)

FORMAT = "dyno-trace-record"
VERSION = 1
MAX_RECORD_BYTES = 4 * 1024 * 1024  # ~16k processes; a host runs tens
MAX_RECORD_PROCESSES = 16_384
MAX_TEXT = 4096  # errors (the agent service cuts them to this too), job ids, host names
_MAX_INT = 1 << 62
_BOOL_FIELDS = PROFILER_FLAGS
_OPT_INT_FIELDS = ("duration_ms", "iterations", "start_time_ms", "start_iteration_roundup")


class RecordError(ValueError):
    """A record that is not believed (the message says why)."""


def record_path(trace_dir: Path, trace_id: str) -> Path:
    return trace_dir / validate_trace_id(trace_id) / RECORD_NAME


# -- writing ----------------------------------------------------------------------------------------------------


def _spec_to_json(spec: TraceSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"job_id": spec.job_id, "pids": list(spec.pids), "process_limit": spec.process_limit}
    out.update({name: getattr(spec, name) for name in _OPT_INT_FIELDS + _BOOL_FIELDS})
    out["periodic"] = spec.periodic
    return out


def encode_record(view: TraceView, hostname: str, finished_ms: int) -> bytes:
    procs = []
    for p in view.processes:
        procs.append(
            {
                "pid": p.pid,
                "job_id": p.job_id,
                "rank": p.rank,
                "protocol": p.protocol,
                "state": p.state.value,
                "error": p.error[:MAX_TEXT],
                "file": Path(p.path).name,  # only the name: the folder is the record's own, whatever the trace dir
                "size_bytes": p.size_bytes,
                "updated_ms": p.updated_ms,
                "waiting": p.waiting[:MAX_TEXT],
                "uid": p.uid,
                "reason": p.reason.value,
                "late_done": p.late_done,
                "running_ms": p.running_ms,
            }
        )
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "trace_id": view.trace_id,
        "hostname": hostname,
        "created_ms": view.created_ms,
        "finished_ms": finished_ms,
        "finished": view.finished,
        "request": _spec_to_json(view.spec),
        "processes": procs,
    }
    return json.dumps(doc, indent=1).encode() + b"\n"


def write_record(trace_dir: Path, view: TraceView, hostname: str, finished_ms: int) -> Path | None:
    """Write the record of a finished trace atomically into its folder; logs and returns None on failure (the
    trace itself is unaffected, only its recovery after a restart)."""
    folder = trace_dir / validate_trace_id(view.trace_id)
    data = encode_record(view, hostname, finished_ms)
    if len(data) > MAX_RECORD_BYTES:
        log.warning("trace %s: record of %d bytes exceeds %d; not written", view.trace_id, len(data), MAX_RECORD_BYTES)
        return None
    problem = trace_dir_problem(trace_dir)
    if problem is not None:  # its folder may be another user's symlink by now
        log.warning("trace %s: record not written: %s", view.trace_id, problem)
        return None
    try:  # trainers write in the folder too: nothing planted there is followed
        return write_file_atomically(folder, RECORD_NAME, data, tmp_prefix=f".{RECORD_NAME}.", mode=0o644)
    except OSError as e:
        log.warning("trace %s: cannot write its record in %s: %s", view.trace_id, folder, e)
        return None


# -- reading ----------------------------------------------------------------------------------------------------


def _read_bounded(path: Path) -> bytes | None:
    """The record's bytes; None when there is none; RecordError when it is not one the daemon wrote. Opened as the
    trace files are served (open_trace_file: no symlink, plain file, one link), and owned by the daemon's uid."""
    try:
        f = open_trace_file(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RecordError("it is a symlink") from None
        if e.errno == errno.EPERM:  # open_trace_file's refusal
            raise RecordError("not a plain file (special file or hard link)") from None
        raise RecordError(f"unreadable: {e.strerror or e}") from None
    with f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.geteuid():
            raise RecordError(f"owned by uid {st.st_uid}, not by the daemon's uid {os.geteuid()}")
        if st.st_size > MAX_RECORD_BYTES:
            raise RecordError(f"{st.st_size} bytes, more than {MAX_RECORD_BYTES}")
        data = f.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"more than {MAX_RECORD_BYTES} bytes")
    return data


def _int(v: Any, what: str, lo: int = 0, hi: int = _MAX_INT) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise RecordError(f"{what}: not an integer in {lo}..{hi}")
    return v


def _opt_int(v: Any, what: str, lo: int = 0) -> int | None:
    return None if v is None else _int(v, what, lo)


def _str(v: Any, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(v, str) or len(v) > limit:
        raise RecordError(f"{what}: not a string of at most {limit} characters")
    return v


def _spec_from_json(r: Any, trace_id: str) -> TraceSpec:
    if not isinstance(r, dict):
        raise RecordError("request: not an object")
    pids = r.get("pids")
    if not isinstance(pids, list) or len(pids) > MAX_RECORD_PROCESSES:
        raise RecordError("request.pids: not a list")
    kw: dict[str, Any] = {name: _opt_int(r.get(name), f"request.{name}", 1) for name in _OPT_INT_FIELDS}
    for name in _BOOL_FIELDS:
        if not isinstance(r.get(name), bool):
            raise RecordError(f"request.{name}: not a boolean")
        kw[name] = r[name]
    periodic = r.get("periodic", False)  # absent in a record from before the field: an on-demand trace
    if not isinstance(periodic, bool):
        raise RecordError("request.periodic: not a boolean")
    return TraceSpec(
        job_id=_str(r.get("job_id"), "request.job_id"),
        pids=tuple(_int(p, "request.pids[]", 1) for p in pids),
        process_limit=_int(r.get("process_limit"), "request.process_limit"),
        trace_id=trace_id,
        periodic=periodic,
        **kw,
    )


def _process_from_json(p: Any, folder: Path, finished: bool) -> ProcessTraceView:
    if not isinstance(p, dict):
        raise RecordError("processes[]: not an object")
    pid = _int(p.get("pid"), "processes[].pid", 1, 1 << 31)
    try:
        state = TraceState(p.get("state"))
    except ValueError:
        raise RecordError(f"pid {pid}: state {str(p.get('state'))[:40]!r} is not a trace state") from None
    if finished and state not in FINAL_STATES:
        raise RecordError(f"pid {pid}: state {state.value} is not final")
    protocol = p.get("protocol")
    if protocol not in (PROTOCOL_AGENT, PROTOCOL_KINETO):
        raise RecordError(f"pid {pid}: unknown protocol")
    name = _str(p.get("file"), f"pid {pid} file", 300)
    m = FILE_NAME_RE.match(name)
    # Only a base name of the daemon's own pattern for this pid: no "/", no "..", nothing outside the folder.
    if m is None or int(m.group("pid")) != pid:
        raise RecordError(f"pid {pid}: file name {name[:80]!r} is not a trace file name of this pid")
    return ProcessTraceView(
        pid=pid,
        job_id=_str(p.get("job_id"), f"pid {pid} job_id"),
        rank=_opt_int(p.get("rank"), f"pid {pid} rank"),
        protocol=protocol,
        state=state,
        path=str(folder / name),
        size_bytes=_int(p.get("size_bytes"), f"pid {pid} size_bytes"),
        error=_str(p.get("error"), f"pid {pid} error"),
        updated_ms=_int(p.get("updated_ms"), f"pid {pid} updated_ms"),
        waiting=_str(p.get("waiting", ""), f"pid {pid} waiting"),  # absent in a record from before the field
        uid=_int(p.get("uid", -1), f"pid {pid} uid", -1),
        reason=_reason(p.get("reason", ""), pid),
        late_done=p.get("late_done") is True,
        running_ms=_int(p.get("running_ms", 0), f"pid {pid} running_ms"),  # absent before the field: not known
    )


def _reason(value: Any, pid: int) -> TraceReason:
    try:
        return TraceReason(_str(value, f"pid {pid} reason"))
    except ValueError:
        raise RecordError(f"pid {pid} reason: {value!r} is not a trace reason") from None


def decode_record(data: bytes, trace_dir: Path, trace_id: str) -> TraceView:
    """Validate every field; RecordError says what is wrong."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise RecordError(f"not JSON: {str(e)[:100]}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RecordError(f"not a {FORMAT}")
    if doc.get("version") != VERSION:
        raise RecordError(f"version {str(doc.get('version'))[:20]} (this daemon reads {VERSION})")
    if doc.get("trace_id") != trace_id:
        raise RecordError("its trace_id is not its folder's")
    procs = doc.get("processes")
    if not isinstance(procs, list) or not 1 <= len(procs) <= MAX_RECORD_PROCESSES:
        raise RecordError(f"processes: not a list of 1..{MAX_RECORD_PROCESSES}")
    finished = doc.get("finished", True)  # records from before partial ones are of finished traces
    if not isinstance(finished, bool):
        raise RecordError("finished: not a boolean")
    folder = trace_dir / trace_id
    views = tuple(_process_from_json(p, folder, finished) for p in procs)
    if len({v.pid for v in views}) != len(views):
        raise RecordError("a pid is listed twice")
    return TraceView(
        trace_id=trace_id,
        spec=_spec_from_json(doc.get("request"), trace_id),
        processes=tuple(_check_file(v) for v in views),
        finished=all(v.state in FINAL_STATES for v in views),
        created_ms=_int(doc.get("created_ms"), "created_ms"),
    )


def _check_file(v: ProcessTraceView) -> ProcessTraceView:
    """A process recorded done whose file is gone or changed since is reported failed (with why), not done."""
    if v.state != TraceState.DONE:
        return v
    try:
        st = os.lstat(v.path)
    except OSError:
        why = "is gone"
    else:
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            why = "is no longer a plain file"
        elif st.st_size != v.size_bytes:
            why = f"changed size ({v.size_bytes} -> {st.st_size} bytes)"
        else:
            return v
    return replace(v, state=TraceState.FAILED, error=f"trace file {v.path} {why} since the trace finished")


# A WARNING per bad record (per version of the file and reason), not one per GetTrace a client polls with
_bad_records = ThrottledLog(log, every_s=math.inf, max_keys=256)


def _warn_once(path: Path, e: RecordError) -> None:
    try:
        st = os.lstat(path)
        version = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        version = "0:0:0"
    _bad_records.warning(f"{path}|{version}|{e}", "ignoring trace record %s: %s", path, e)


def load_record(trace_dir: Path, trace_id: str, *, quiet: bool = False) -> TraceView | None:
    """The finished trace recorded in `<trace_dir>/<trace_id>`, or None: no record (an invalid id, a trace that never
    finished, one from before records existed) or one not believed (logged as a WARNING). `quiet`: no INFO line for
    a record believed (a caller reading many at once says how many itself)."""
    try:
        path = record_path(trace_dir, trace_id)
    except ValueError:
        return None
    try:
        if not stat.S_ISDIR(os.lstat(path.parent).st_mode):
            raise RecordError("its trace folder is not a directory (a symlink?)")
        data = _read_bounded(path)
        if data is None:
            return None
        view = decode_record(data, trace_dir, trace_id)
    except FileNotFoundError:
        return None
    except RecordError as e:
        _warn_once(path, e)
        return None
    if not quiet:
        log.info("trace %s: recovered from its record (%d process(es))", trace_id, len(view.processes))
    return view


def forgotten_trace_hint(trace_dir: Path, trace_id: str) -> str:
    """For an unknown trace id whose folder exists but has no (believable) record: the daemon restarted before the
    trace finished (records are written only then); its files, if any, are still in the folder."""
    folder = trace_dir / trace_id
    try:
        if not is_trace_id(trace_id) or not folder.is_dir():
            return ""
    except OSError:
        return ""
    return (
        f" (its folder {folder} exists but holds no record of a finished trace: the trace was still running when "
        "this daemon restarted, or ran under a dyno too old to write records; its files, if any, are in that folder)"
    )
