"""What `dyno-cli trace` and `dyno-cli fetch` print: the per-process summary table, the analysis report (text,
--html), the end of a run on stderr, and its --json object."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dyno import exit_codes
from dyno.client.commands._common import JsonText, print_json, print_out
from dyno.client.format import human_bytes, table
from dyno.client.trace.manifest import write_text_atomic
from dyno.client.trace.records import FetchFailure, HostRecord
from dyno.numpy_import import import_numpy_single_threaded

if TYPE_CHECKING:
    from dyno.client.commands._trace_flow import TraceFlow
    from dyno.trace_analysis.report import Report

__all__ = [
    "MANIFEST_STATUS",
    "analyze_files",
    "nothing_to_follow",
    "print_outcome",
    "render_report",
    "say",
    "summary_table",
]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


MANIFEST_STATUS = {exit_codes.OK: "complete", exit_codes.PARTIAL: "partial"}  # the manifest's status; else "failed"


def nothing_to_follow(flow: TraceFlow, what: str, code: int, hint: str = "") -> int:
    """No host has anything to follow: each host's reason, then `what` and `hint` (what to try), on stderr; no
    folder. --json prints the same object as a followed trace (the manifest's keys, `ok`, `exit_code`...;
    `output_dir` null: nothing was written), so a tool reads one shape."""
    hosts = flow.ct.snapshot()
    if flow.args.json:
        manifest = flow.manifest(MANIFEST_STATUS.get(code, "failed"), code)
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


def summary_table(hosts: list[HostRecord]) -> str:
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


def analyze_files(args: argparse.Namespace, files: list[Path]) -> tuple[JsonText | None, str | None]:
    """Run the analysis on exactly the fetched files; print / write its reports. Returns (the report as JSON, error)."""

    def analyze_them() -> Report:
        from dyno.trace_analysis import analyze

        return analyze([str(f) for f in files])

    return render_report(args, analyze_them)


def render_report(args: argparse.Namespace, make: Callable[[], Report]) -> tuple[JsonText | None, str | None]:
    """The report `make()` returns (the analysis of fetched files, or the merge of the hosts' summaries), printed as
    text (not with --json) and written to --html. Returns (the report as JSON: with --json only, error)."""
    try:
        import_numpy_single_threaded()
        report = make()
        result = None
        if args.json:  # only --json prints it: a 1,024-rank report is ~30 MB of JSON, longer to write than to merge
            from dyno.trace_analysis.report.jsonout import render_json

            result = JsonText(render_json(report))
        else:
            from dyno.trace_analysis.report.text import render_text

            print_out()
            print_out(render_text(report, all_ranks=getattr(args, "all_ranks", False)))
    except Exception as e:  # analysis problems are reported; they never change the trace's exit code
        return None, f"{type(e).__name__}: {e}"
    # Last, and atomically: a full disk leaves no truncated --html file, and the text report is already out.
    if args.html:
        try:
            from dyno.trace_analysis.report.html import render_html

            html = render_html(report, all_ranks=getattr(args, "all_ranks", False))
        except Exception as e:  # as any analysis problem: reported, the JSON report kept (not a traceback)
            return result, f"HTML report: {type(e).__name__}: {e}"
        try:
            write_text_atomic(args.html, html)
        except OSError as e:
            return result, f"cannot write --html {args.html}: {e.strerror or e}"
        if not args.json:
            print_out(f"HTML report written to {args.html}")
    return result, None


def print_outcome(
    command: str,
    folder: Path,
    trace_id: str,
    final: list[HostRecord],
    result: dict[str, Any],
    *,
    code: int,
    status: str,
    files: list[Path],
    report: JsonText | None,
    analysis_error: str | None,
    manifest_error: str | None,
    json_out: bool,
) -> None:
    """The end of a followed trace on stderr (the manifest's errors, notes, what is left on the daemons, the
    outcome line) and, with --json, the manifest, exit code and report as one object on stdout."""
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
        refused = any(p.fetch_failure is FetchFailure.UNAUTHENTICATED for p in left)
        auth = " and the daemons' token (--auth-token-file) or TLS options" if refused else ""
        say(
            f"dyno-cli {command}: {len(left)} traced file(s) not fetched are still on the daemons: `dyno-cli fetch "
            f"--trace-id {trace_id} --output-dir {folder.parent}` with the same host options{auth} gets them"
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
    if json_out:
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
