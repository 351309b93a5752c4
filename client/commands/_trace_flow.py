"""What `dyno-cli trace` and `dyno-cli fetch` share once a cluster trace is joined (trace: ClusterTrace.start(),
fetch: ClusterTrace.attach()): follow every host with live progress, fetch the files into
OUTPUT_DIR/TRACE_ID/HOST_PORT/, write manifest.json, print the per-process summary, analyze what arrived, list
what did not, and choose the exit code (0 everything arrived, 3 partial, 1 nothing, 130 interrupted)."""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dyno import exit_codes
from dyno.argtypes import INT32_MAX, nonempty_path, number
from dyno.client.cluster_trace import ClusterTrace
from dyno.client.commands._common import print_json, print_out, proto_to_dict
from dyno.client.commands._hosts import usage_error
from dyno.client.commands._interrupts import InterruptGuard
from dyno.client.format import human_bytes, table
from dyno.client.trace_manifest import build_manifest, write_manifest, write_text_atomic
from dyno.client.trace_progress import make_progress
from dyno.client.trace_records import HostRecord, trace_exit_code
from dyno.numpy_import import import_numpy_single_threaded
from dyno.trace_ids import validate_trace_id
from dyno.trace_layout import MARKER_NAME, RECORD_NAME
from dyno.v1 import dyno_pb2

__all__ = [
    "COLLECT_EXIT_CODES",
    "ITERATION_WAIT_S",
    "MAX_FETCH_CONCURRENCY",
    "MAX_WAIT_S",
    "AFTER_WINDOW_S",
    "TraceFlow",
    "add_collect_arguments",
    "check_html",
    "check_trace_folder",
    "check_trace_id",
    "check_writable",
    "check_not_a_daemon_trace_dir",
    "DAEMON_TRACE_FOLDER_FILES",
    "default_wait_s",
    "non_negative_float",
    "nothing_to_follow",
    "positive_int32",
    "say",
    "trace_folder",
]

log = logging.getLogger(__name__)

_REFRESH_S = 0.25
positive_int32 = number(int, gt=0, le=INT32_MAX)  # pids, counts: int32 in the TraceRequest
non_negative_float = number(float, ge=0)
# Files fetched at once across hosts. Each host's files come one after another, so more than one per host never
# runs; and the streams share this machine's disk and NIC (the daemons serve at most 12 at once each): beyond a few
# dozen nothing gets faster, only more threads and open files.
MAX_FETCH_CONCURRENCY = 256
# The overall wait for the traces: a day is far beyond any trace window (duration traces last at most 10 min).
MAX_WAIT_S = 86400.0
_fetch_concurrency = number(int, ge=1, le=MAX_FETCH_CONCURRENCY)
_wait_s = number(float, ge=0, le=MAX_WAIT_S)  # fetch: 0 = take what is done now
_positive_wait_s = number(float, gt=0, le=MAX_WAIT_S)  # trace: 0 would cancel the trace before it starts

ITERATION_WAIT_S = 300.0  # how long iteration traces are waited for by default
# What trace and fetch return (TraceFlow.run, nothing_to_follow); each command says what 1 means for it.
COLLECT_EXIT_CODES: dict[int, str] = {
    exit_codes.OK: "every host's processes traced and every file fetched",
    exit_codes.USAGE: "usage, before any host is called (bad options, values beyond the daemons' request limits, "
    "malformed host lists, an output folder that exists or cannot be written)",
    exit_codes.PARTIAL: "partial: some files arrived, but a host failed or matched nothing, or a process failed, "
    "timed out or was busy, or its file did not arrive (each listed on stderr with its reason)",
    exit_codes.INTERRUPTED: "interrupted by Ctrl-C or SIGTERM (manifest.json is still written; during the analysis "
    "only the analysis stops)",
}
AFTER_WINDOW_S = 60.0  # a duration trace is waited for until its window's end plus this


def default_wait_s(request: dyno_pb2.TraceRequest, now_s: float) -> float:
    """How long to wait for a trace by default, from its request: the rest of a duration trace's window plus a
    margin (the daemons end unfinished processes by their own timeouts), else ITERATION_WAIT_S."""
    if not request.HasField("duration_ms"):
        return ITERATION_WAIT_S
    start_in = max(0.0, request.start_time_ms / 1000 - now_s) if request.HasField("start_time_ms") else 0.0
    return start_in + request.duration_ms / 1000 + AFTER_WINDOW_S


def add_collect_arguments(p: argparse.ArgumentParser, *, timeout_help: str, zero_timeout: bool) -> None:
    """--output-dir, --timeout-s (the overall wait; None when not given, its default and meaning differ per command;
    `zero_timeout`: 0 is allowed), --fetch-concurrency, --no-analyze, --html and --json."""
    p.add_argument("--output-dir", required=True, type=nonempty_path, help="files go to OUTPUT_DIR/TRACE_ID/HOST_PORT/")
    p.add_argument(
        "--timeout-s",
        type=_wait_s if zero_timeout else _positive_wait_s,
        metavar="S",
        help=f"{timeout_help} ({'0-' if zero_timeout else '> 0, at most '}{MAX_WAIT_S:g})",
    )
    p.add_argument(
        "--fetch-concurrency",
        type=_fetch_concurrency,
        default=8,
        metavar="N",
        help=f"files fetched at once, across hosts (default 8; 1-{MAX_FETCH_CONCURRENCY})",
    )
    p.add_argument("--no-analyze", action="store_true", help="do not analyze the fetched files")
    p.add_argument("--html", type=nonempty_path, metavar="FILE", help="also write the HTML analysis report here")
    p.add_argument("--json", action="store_true", help="print the manifest and the report as one JSON object on stdout")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def check_trace_id(trace_id: str) -> None:
    """Usage error (exit 2) unless `trace_id` is one the daemons accept (dyno.trace_ids)."""
    try:
        validate_trace_id(trace_id)
    except ValueError as e:
        usage_error(f"--trace-id: {e}")


# What dynod leaves in each folder of its trace dir: how an --output-dir that is a daemon's trace dir is recognised.
DAEMON_TRACE_FOLDER_FILES = (MARKER_NAME, RECORD_NAME)
_SCAN_ENTRIES = 200  # folders of OUTPUT_DIR looked at for them (a trace dir's are all alike)


def _is_daemon_trace_folder(folder: Path) -> bool:
    return any(os.path.lexists(folder / name) for name in DAEMON_TRACE_FOLDER_FILES)


def check_not_a_daemon_trace_dir(output_dir: Path) -> None:
    """Usage error (exit 2) when `output_dir` is a dynod's trace dir (/tmp/dyno-traces, the natural guess on one
    host) or one of its trace folders: the fetched copies and manifest.json went into the daemon's own folder of the
    trace, beside its files (read twice by `analyze`), where its retention deletes them."""
    if _is_daemon_trace_folder(output_dir):
        usage_error(
            f"--output-dir {output_dir}: is a dynod's trace folder (its retention deletes what is put there); "
            "choose a folder of your own"
        )
    try:
        with os.scandir(output_dir) as entries:
            for entry in itertools.islice(entries, _SCAN_ENTRIES):
                if entry.is_dir(follow_symlinks=False) and _is_daemon_trace_folder(Path(entry.path)):
                    usage_error(
                        f"--output-dir {output_dir}: is a dynod's trace dir ({entry.name} is one of its trace "
                        "folders): its retention deletes what is fetched there; choose a folder of your own"
                    )
    except OSError:  # missing (made later) or unreadable: check_writable says what matters
        pass


def check_writable(output_dir: Path) -> None:
    """Usage error (exit 2) unless files can be created in `output_dir`, and it is not a dynod's trace dir. Nothing
    is made here: the folders are made when the first file is written, so a run that records nothing (no host
    traced) leaves no folder behind."""
    check_not_a_daemon_trace_dir(output_dir)
    existing = output_dir
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent  # the folder that mkdir will create the missing ones in
    try:
        if not existing.is_dir():  # the path, or a folder on it, is a file (mkdir said "File exists" for the path)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        usage_error(f"--output-dir {output_dir}: cannot write there: {e.strerror or e}")


def check_trace_folder(folder: Path, *, may_hold_files: bool) -> None:
    """Usage error (exit 2) unless OUTPUT_DIR/TRACE_ID is missing or a folder, and (for `trace`: a new trace must
    not mix with another's files) empty unless `may_hold_files` (`fetch` reuses what an earlier run fetched)."""
    if os.path.lexists(folder) and not folder.is_dir():
        usage_error(f"{folder} exists and is not a folder (choose another --trace-id or --output-dir)")
    if not may_hold_files and folder.is_dir() and any(folder.iterdir()):
        usage_error(f"{folder} already exists and is not empty (choose another --trace-id or --output-dir)")


def check_html(html: Path | None, *, no_analyze: bool = False) -> None:
    """Usage error (exit 2) unless the --html report can be written where asked: in an existing folder, not over
    a folder, and with the analysis on. Checked before anything is traced, not found out after the trace."""
    if html is None:
        return
    if html.is_dir():
        usage_error(f"--html {html}: is a folder (give a file name)")
    folder = html.parent
    if not folder.is_dir():
        usage_error(f"--html {html}: {folder} is not an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        usage_error(f"--html {html}: cannot write in {folder}")
    if no_analyze:  # the report is the analysis': none was written, without a word
        usage_error("--html writes the analysis report: it cannot go with --no-analyze")


@contextlib.contextmanager
def trace_folder(folder: Path) -> Iterator[Path]:
    """The run's OUTPUT_DIR/TRACE_ID. When the run fails (an exception: a full disk when the manifest is written,
    any write failure) and the folder did not exist before it and holds no file, it is removed again, with the
    folders above it that the run made (a new OUTPUT_DIR): an empty folder records nothing and looks like a
    result. A folder that existed before, or that holds any file (a manifest, a trace, anything), is never
    touched: nothing is lost on failure."""
    existed = os.path.lexists(folder)
    top = folder  # the highest folder this run will have made
    while not os.path.lexists(top.parent) and top.parent != top:
        top = top.parent
    try:
        yield folder
    except BaseException:
        if not existed:
            _remove_if_empty(top)
        raise


def _remove_if_empty(folder: Path) -> None:
    """Remove `folder` and its subfolders when it holds nothing but empty folders (e.g. a host folder made for a
    fetch that failed); else leave all of it. rmdir only: it refuses a folder that is not empty, so a file that
    appears meanwhile is never removed."""
    dirs: list[Path] = []

    def only_folders(d: Path) -> bool:
        dirs.append(d)
        with os.scandir(d) as it:
            return all(e.is_dir(follow_symlinks=False) and only_folders(Path(e.path)) for e in it)

    try:
        if not folder.is_dir() or folder.is_symlink() or not only_folders(folder):
            return
        for d in reversed(dirs):  # children before their parents
            d.rmdir()
    except OSError as e:  # best effort: the run's own error is what the user must see
        log.debug("could not remove the empty folder %s: %s", folder, e)


def nothing_to_follow(flow: TraceFlow, what: str, code: int, hint: str = "") -> int:
    """No host has anything to follow: each host's reason, then `what` and `hint` (what to try), on stderr; no
    folder. --json prints the same object as a followed trace (the manifest's keys, `ok`, `exit_code`...;
    `output_dir` null: nothing was written), not a smaller one a tool would have to tell apart (it had no
    `exit_code` nor `status`)."""
    hosts = flow.ct.snapshot()
    if flow.args.json:
        manifest = flow.manifest(_STATUS.get(code, "failed"), code)
        print_json(
            {
                **manifest,
                "ok": code == 0,
                "output_dir": None,
                "report": None,
                "analysis_error": None,
                "manifest_error": None,
            }
        )
    for h in hosts:  # the daemons' reasons name the jobs that are registered
        say(f"dyno-cli {flow.command}: {h.host}: {h.error}" + (f" ({h.error_type})" if h.error_type else ""))
    say(f"dyno-cli {flow.command}: {what}")
    if hint:
        say(f"dyno-cli {flow.command}: {hint}")
    return code


_STATUS = {exit_codes.OK: "complete", exit_codes.PARTIAL: "partial"}  # the manifest's status; else "failed"


def _summary(hosts: list[HostRecord]) -> str:
    rows: list[list[object]] = []
    for h in hosts:
        if not h.processes:
            rows.append([str(h.host), "-", "-", h.state.replace("_", " "), "-", "-"])
        for p in h.processes:
            state = p.state if p.ok or p.fetch != "failed" else "fetch_failed"
            rows.append(
                [
                    str(h.host),
                    p.pid,
                    "-" if p.rank is None else p.rank,
                    state,
                    p.file if p.ok else "-",  # the reason is listed below the report
                    human_bytes(p.fetched_bytes) if p.ok else "-",
                ]
            )
    return table(["HOST", "PID", "RANK", "STATE", "FILE", "SIZE"], rows, text=("HOST", "FILE"))


def _analyze(args: argparse.Namespace, files: list[Path]) -> tuple[dict[str, Any] | None, str | None]:
    """Run the analysis on exactly the fetched files; print / write its reports. Returns (report dict, error)."""
    try:
        import_numpy_single_threaded()
        from dyno.trace_analysis import analyze
        from dyno.trace_analysis.report import render_html, render_json, render_text

        report = analyze([str(f) for f in files])
        if not args.json:
            print_out()
            print_out(render_text(report))
        result = json.loads(render_json(report, indent=False))
    except Exception as e:  # analysis problems are reported; they never change the trace's exit code
        return None, f"{type(e).__name__}: {e}"
    # Last, and atomically: a full disk used to leave a truncated --html file and lose the text report with it.
    if args.html:
        try:
            html = render_html(report)
        except Exception as e:  # as any analysis problem: reported, the JSON report kept (not a traceback)
            return result, f"HTML report: {type(e).__name__}: {e}"
        try:
            write_text_atomic(args.html, html)
        except OSError as e:
            return result, f"cannot write --html {args.html}: {e.strerror or e}"
        if not args.json:
            print_out(f"HTML report written to {args.html}")
    return result, None


class TraceFlow:
    """Follows a joined ClusterTrace to the end for the command `command` ("trace" or "fetch"), whose options
    are `args` (add_collect_arguments' and the host options). `folder` is OUTPUT_DIR/TRACE_ID; `requested_ms`
    when the trace was requested (the manifest's timings)."""

    def __init__(
        self, ct: ClusterTrace, args: argparse.Namespace, folder: Path, *, command: str, requested_ms: int
    ) -> None:
        self.ct = ct
        self.args = args
        self.folder = folder
        self.command = command
        self.requested_ms = requested_ms
        self.request = proto_to_dict(ct.request)
        # The command holds it from its first StartTrace (or GetTrace) to its end: see _interrupts.
        cleanup = "cancelling the traces and writing manifest.json" if ct.owns_trace else "writing manifest.json"
        self.guard = InterruptGuard(f"dyno-cli {command}: Ctrl-C: {cleanup} first (a few seconds at most)")

    def manifest(self, status: str, code: int | None = None) -> dict[str, Any]:
        return build_manifest(
            trace_id=self.ct.trace_id,
            request=self.request,
            hosts=self.ct.snapshot(),
            status=status,
            requested_ms=self.requested_ms,
            start_fanout_s=self.ct.start_fanout_s,
            exit_code=code,
            finished_ms=None if code is None else int(time.time() * 1000),
        )

    def run(self, title: str, *, interrupted: bool = False) -> int:
        """Follow (unless already `interrupted` while joining), then record, summarize, analyze, report.
        The "running" manifest is the caller's to write first (what to do when it cannot be written differs)."""
        ct, args, folder, command = self.ct, self.args, self.folder, self.command
        start_ms = ct.request.start_time_ms if ct.request.HasField("start_time_ms") else 0
        progress = make_progress(title, live=False if args.json else None, start_ms=start_ms)
        if not interrupted:
            try:
                with self.guard.interruptible():
                    ct.follow()
                    while not ct.wait(_REFRESH_S):
                        progress.update(ct.snapshot())
            except KeyboardInterrupt:
                interrupted = True
                if ct.owns_trace:
                    what = "cancelling the traces still running and writing the manifest"
                else:
                    what = "writing the manifest (the trace goes on on the daemons)"
                say(f"dyno-cli {command}: interrupted: {what}")
                ct.interrupt()
        progress.close(ct.snapshot())
        final = ct.snapshot()
        code = exit_codes.INTERRUPTED if interrupted else trace_exit_code(final)
        status = "interrupted" if interrupted else _STATUS.get(code, "failed")
        result = self.manifest(status, code)
        manifest_error = None
        try:
            write_manifest(folder, result)
        except OSError as e:  # a full disk: what arrived is still shown and analyzed; the exit code says it failed
            manifest_error = f"cannot write {e.filename}: {e.strerror or e}"
            code = exit_codes.FAILURE

        files = ct.fetched_files()
        report, analysis_error = (None, None)
        if not args.json:
            print_out(_summary(final))
        if interrupted:
            self.guard.discard()  # a Ctrl-C while cancelling asked for what is being done: the end
        elif files and not args.no_analyze:
            try:
                with self.guard.interruptible():
                    report, analysis_error = _analyze(args, files)
            except KeyboardInterrupt:  # only the analysis stops: the files and the manifest are complete
                code, analysis_error = exit_codes.INTERRUPTED, "interrupted"
        for line in result["errors"]:
            say(f"dyno-cli {command}: {line}")
        for h in final:  # a file that arrived with a note (e.g. it ended early): worth saying, not a failure
            for p in h.processes:
                if p.ok and p.error:
                    say(f"dyno-cli {command}: {h.host} pid {p.pid}: note: {p.error}")
        if analysis_error == "interrupted":
            say(f"dyno-cli {command}: analysis interrupted (the files and manifest.json are complete)")
        elif analysis_error:
            say(f"dyno-cli {command}: analysis failed (the traces are fine): {analysis_error}")
        left = [p for h in final for p in h.processes if p.state == "done" and not p.ok]
        if left:  # files the daemons still serve (retention permitting): say how to get them without tracing again
            # a daemon that refused the token refuses it again: "the same options" alone would fail the same way
            refused = any("not authenticated" in p.error for p in left)
            auth = " and the daemons' token (--auth-token-file) or TLS options" if refused else ""
            say(
                f"dyno-cli {command}: {len(left)} traced file(s) not fetched are still on the daemons: `dyno-cli fetch "
                f"--trace-id {ct.trace_id} --output-dir {folder.parent}` with the same host options{auth} gets them"
            )
        hosts_ok = sum(not h.failed for h in final)
        reused = sum(p.ok and p.reused for h in final for p in h.processes)
        kept = f" ({reused} already there, checksum verified)" if reused else ""
        if manifest_error:  # the line below says why
            saved = f"files in {folder} (manifest.json not written: see the error below)"
        else:
            saved = f"files and manifest.json in {folder}"
        say(
            f"dyno-cli {command}: {status}: {len(files)} of {result['summary']['processes']} traced file(s) "
            f"fetched{kept}, {hosts_ok} of {len(final)} host(s) ok; {saved}"
        )
        if manifest_error:
            say(f"dyno-cli: error: {manifest_error} (the manifest.json there, if any, is an earlier one)")
        if args.json:
            where = folder.absolute()  # absolute, as documented: a tool may read them from another directory
            for pr in result["processes"]:
                pr["path"] = str(where / pr["file"]) if pr["file"] else ""
            print_json(
                {
                    **result,
                    "exit_code": code,  # the CLI's: 1 when the manifest could not be written, 130 when interrupted
                    "ok": code == 0,
                    "output_dir": str(where),
                    "report": report,
                    "analysis_error": analysis_error,
                    "manifest_error": manifest_error,
                }
            )
        return code
