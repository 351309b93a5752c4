"""manifest.json of a cluster trace folder: what was asked, of which hosts, and what arrived (schema in
docs/CLUSTER.md). Written atomically (temp file, fsync, rename) so a reader or a crash never sees half a file."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dyno
from dyno.client.trace.records import HostRecord, PreviousFile
from dyno.filechunks import CHECKSUM_ALGORITHM

__all__ = [
    "MANIFEST_NAME",
    "SCHEMA",
    "SCHEMA_VERSION",
    "build_manifest",
    "previous_files",
    "read_manifest",
    "write_manifest",
    "write_text_atomic",
]

MANIFEST_NAME = "manifest.json"
SCHEMA = "dyno.trace-manifest"
SCHEMA_VERSION = 1


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def build_manifest(
    *,
    trace_id: str,
    request: dict[str, Any],
    hosts: Sequence[HostRecord],
    status: str,
    requested_ms: int,
    start_fanout_s: float,
    exit_code: int | None = None,
    finished_ms: int | None = None,
) -> dict[str, Any]:
    """The manifest as a dict. `status`: running | complete | partial | failed | interrupted."""
    processes = [{"host": str(h.host), **p.to_dict()} for h in hosts for p in h.processes]
    # One line per failed host, then one per missing file of the other hosts (a failed host's line covers its own).
    failed_hosts = {str(h.host) for h in hosts if h.failed}
    errors = [f"{h.host}: {h.error}" + (f" ({h.error_type})" if h.error_type else "") for h in hosts if h.failed]
    errors += [
        f"{pr['host']} pid {pr['pid']}: {pr['error'] or pr['state']}"
        for pr in processes
        if pr["fetch"] != "fetched" and pr["host"] not in failed_hosts
    ]
    timings: dict[str, Any] = {
        "requested_ms": requested_ms,
        "requested_at": _iso(requested_ms),
        "start_time_ms": int(request.get("start_time_ms", 0)) or None,
        "start_fanout_s": round(start_fanout_s, 4),
    }
    if finished_ms is not None:
        timings["finished_ms"] = finished_ms
        timings["elapsed_s"] = round((finished_ms - requested_ms) / 1000, 3)
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "trace_id": trace_id,
        "job_id": request.get("job_id", ""),
        "status": status,
        "exit_code": exit_code,
        "client": {"dyno": dyno.__version__, "hostname": socket.gethostname(), "argv": sys.argv[1:]},
        "request": request,
        "timings": timings,
        "summary": {
            "hosts": len(hosts),
            "hosts_failed": sum(h.failed for h in hosts),
            "processes": len(processes),
            "fetched": sum(pr["fetch"] == "fetched" for pr in processes),
            "bytes": sum(pr["fetched_bytes"] for pr in processes if pr["fetch"] == "fetched"),
        },
        "hosts": [h.to_dict() for h in hosts],
        "processes": processes,
        "errors": errors,
    }


def write_manifest(folder: Path, manifest: dict[str, Any]) -> Path:
    """Write <folder>/manifest.json atomically; returns its path (errors: write_text_atomic)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MANIFEST_NAME
    write_text_atomic(path, json.dumps(manifest, indent=2) + "\n")
    return path


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (a temp file beside it, fsync, rename): a full disk or a Ctrl-C leaves the
    previous file, or none, never a truncated one. An OSError names `path` (a full disk fails the write or the
    fsync, whose errors carry no file name)."""
    # Not tempfile.mkstemp: its 0600 would hide the file from those who can read the traces beside it
    # (created with the user's umask); O_EXCL with a random name gives the same safety with the umask's mode.
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
    try:  # the open too: whatever stops the write (a Ctrl-C included) removes the temp file
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


def read_manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / MANIFEST_NAME).read_text())


def previous_files(folder: Path) -> dict[tuple[str, int], PreviousFile]:
    """The files an earlier run's manifest.json in `folder` records as fetched, by (host, pid), with their
    checksums: what `dyno-cli fetch` may keep after verifying them. No manifest, an unreadable one or another
    schema: nothing (everything is fetched again)."""
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError):
        return {}
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        return {}
    found: dict[tuple[str, int], PreviousFile] = {}
    for pr in manifest.get("processes") or []:
        try:
            if pr["fetch"] == "fetched" and pr["file"] and str(pr["checksum"]).startswith(CHECKSUM_ALGORITHM + ":"):
                found[(str(pr["host"]), int(pr["pid"]))] = PreviousFile(str(pr["file"]), str(pr["checksum"]))
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited or foreign entry: that file is fetched again
    return found
