"""``dyno-cli analyze`` / ``python -m dyno.trace_analysis``: analyse traces, print a report.

The lead mounts it with ``add_analyze_arguments(subparser)`` and ``run_analyze(args)``; ``parse_args`` parses
so that a usage error under --json is a JSON error object too. Exit codes: EXIT_CODES (0 ok, 1 failure: bad input,
nothing loaded, bad threshold/rule; 2 usage: argparse, or no PATH; 130 interrupted). Errors print one line on
stderr, never a traceback; with --json, stdout always holds one JSON object: the report, or the error object
(ERROR_SCHEMA, docs/ANALYSIS_REPORT.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from dyno import exit_codes
from dyno.argtypes import number
from dyno.gc_pause import gc_paused
from dyno.numpy_import import import_numpy_single_threaded, one_openblas_thread
from dyno.usage_json import json_requested, parse_args_reporting

if TYPE_CHECKING:
    from .readahead import ReadAhead

__all__ = [
    "DESCRIPTION",
    "ERROR_SCHEMA",
    "EXIT_CODES",
    "add_analyze_arguments",
    "error_json",
    "main",
    "parse_args",
    "run_analyze",
]

ERROR_SCHEMA = "dyno.trace_analysis.error"  # what --json prints when there is no report
ERROR_SCHEMA_VERSION = 1
DESCRIPTION = (
    "Load PyTorch profiler / Kineto traces (plain or gzip JSON; a folder is one job's ranks), compute HTA-style "
    "breakdowns and cross-rank figures, run the antipattern rules, and print a report ordered by severity, then "
    "time lost (--json for tooling, --html FILE for a standalone report)."
)
EXIT_CODES: dict[int, str] = {
    exit_codes.OK: "report printed (findings or not)",
    exit_codes.FAILURE: "failure (no trace could be loaded, unknown rule, bad threshold, HTML file not writable or "
    "an input trace)",
    exit_codes.USAGE: "usage (no PATH, a bad option)",
    exit_codes.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM)",
}
EPILOG = (
    exit_codes.describe(EXIT_CODES) + " A file that fails to load is reported on stderr and in the report's errors; "
    "the other ranks are analysed. With --json, a failure prints a JSON error object instead of the report "
    f'({{"schema": "{ERROR_SCHEMA}", "ok": false, "exit_code": N, "error": "..."}}).'
)

logger = logging.getLogger(__name__)


def add_analyze_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The analyze options. Importing this module and building the parser load neither numpy nor the rules: every
    dyno-cli command builds the whole parser, and `dyno-cli status` should not pay ~0.15 s for them."""
    if parser.epilog is None:  # the exit codes, also under dyno-cli's own description of the command
        parser.epilog = EPILOG
    parser.add_argument("paths", nargs="*", metavar="PATH", help="trace file(s) (.json/.json.gz) or folder(s) of ranks")
    parser.add_argument("--json", action="store_true", help="print the JSON report (schema v2) instead of text")
    parser.add_argument("--html", metavar="FILE", help="also write a standalone HTML report to FILE")
    parser.add_argument(
        "--all-ranks",
        action="store_true",
        help="a section, findings and tables per rank in the text and HTML reports however many ranks (past 16 "
        "ranks they show the slowest and fastest ranks, and a rule's findings on many ranks as one line)",
    )
    parser.add_argument(
        "--rules",
        action="append",
        metavar="IDS",
        # an exclusion must follow "=": argparse takes a separate word starting with "-" for an option
        help="comma-separated rule ids to run (ids: --list-rules; repeatable); a leading - excludes one, written "
        "after = (--rules=-straggler); default all",
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="RULE.KEY=VALUE",
        help="override a rule threshold, e.g. low-gpu-util.min_util=0.4 (repeatable; see --list-rules)",
    )
    parser.add_argument("--list-rules", action="store_true", help="list rules and their default thresholds, then exit")
    parser.add_argument(
        "--jobs",
        type=number(int, ge=1, le=1024),
        metavar="N",
        help="processes for a job of several ranks (default: one per usable core, from 4 MiB of trace files; "
        "1: one process)",
    )
    return parser


def _list_rules() -> str:
    from .rules import ALL_RULES

    lines = []
    for r in ALL_RULES:
        th = ", ".join(f"{k}={v}" for k, v in r.thresholds.items()) or "-"
        lines.append(f"{r.id:<20} {r.title}  [{th}]")
    return "\n".join(lines) + "\n"


def _input_at(target: str, paths: Sequence[str]) -> str | None:
    """The input trace that writing ``target`` would overwrite: a file given, or a trace file in a folder given."""
    t = Path(target)
    if not t.is_file():
        return None
    real = os.path.realpath(t)
    for p in map(Path, paths):
        if p.is_dir():
            if t.name.endswith((".json", ".json.gz")) and real.startswith(os.path.realpath(p) + os.sep):
                return str(t)
        elif p.exists() and os.path.samefile(p, t):
            return str(p)
    return None


def error_json(code: int, message: str) -> str:
    """The JSON object --json prints instead of a report when the command fails (docs/ANALYSIS_REPORT.md)."""
    doc = {"schema": ERROR_SCHEMA, "version": ERROR_SCHEMA_VERSION, "ok": False, "exit_code": code, "error": message}
    return json.dumps(doc, indent=2) + "\n"


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``; when argv asks for --json, a usage error also prints the JSON error object on
    stdout before argparse's usage lines on stderr and its exit 2, so a tool reading stdout gets JSON."""
    if not json_requested(argv):
        return parser.parse_args(argv)
    return parse_args_reporting(parser, argv, lambda message: sys.stdout.write(error_json(exit_codes.USAGE, message)))


def run_analyze(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None, prog: str = "dyno-cli"
) -> int:
    """``prog``: the program named on stderr lines (``dyno-cli: error: ...``, as every other dyno-cli command)."""
    out = out or sys.stdout
    err = err or sys.stderr

    def fail(code: int, message: str) -> int:
        err.write(f"{prog}: error: {message}\n")
        if getattr(args, "json", False):  # tools reading stdout get JSON whatever happened
            out.write(error_json(code, message))
        return code

    ahead: ReadAhead | None = None
    try:
        # The cyclic collector paused over the imports: they build only long-lived objects (modules, classes,
        # functions), which each collection would walk again. One trace file is read meanwhile on a second thread.
        with gc_paused(), one_openblas_thread():
            ahead = _start_read_ahead(args)
            import_numpy_single_threaded()
            from .api import AnalysisError, analyze
            from .rules import ThresholdError, parse_threshold_args

        if getattr(args, "list_rules", False):
            out.write(_list_rules())
            return exit_codes.OK
        if not args.paths:
            return fail(exit_codes.USAGE, "give at least one trace file or folder (PATH...)")
        if args.html and (clash := _input_at(args.html, args.paths)):
            return fail(exit_codes.FAILURE, f"--html {args.html} is the input trace {clash}: refusing to overwrite it")
        try:
            thresholds = parse_threshold_args(args.threshold or [])
            report = analyze(args.paths, rules=args.rules, thresholds=thresholds, workers=getattr(args, "jobs", None))
        except (ThresholdError, AnalysisError) as e:
            return fail(exit_codes.FAILURE, str(e))
        except MemoryError:
            return fail(exit_codes.FAILURE, "out of memory while loading the traces")
        for problem in report.errors:  # on stderr too: a report redirected to a file must not hide a skipped rank
            err.write(f"{prog}: warning: skipped {problem.path}: {problem.reason}\n")
        if args.html:
            from .report.html import render_html

            try:
                Path(args.html).write_text(
                    render_html(report, all_ranks=getattr(args, "all_ranks", False)), encoding="utf-8"
                )
            except OSError as e:
                return fail(exit_codes.FAILURE, f"cannot write {args.html}: {e.strerror or e}")
        # only the renderer asked for is imported (--json: neither the text nor the HTML one)
        if args.json:
            from .report.jsonout import render_json

            out.write(render_json(report))
        else:
            from .report.text import render_text

            out.write(render_text(report, all_ranks=getattr(args, "all_ranks", False)))
        if args.html and not args.json:
            out.write(f"HTML report written to {args.html}\n")
        return exit_codes.OK
    finally:
        if ahead is not None:  # not claimed when the command failed before the load: stop its thread
            from .readahead import discard

            discard(ahead)


def _start_read_ahead(args: argparse.Namespace) -> ReadAhead | None:
    """Start reading the trace file ahead (``readahead``) when the paths name exactly one, to be loaded in this
    process with the native decoder; None otherwise (the load then reads it as it comes: nothing else changes)."""
    if getattr(args, "list_rules", False) or not args.paths or getattr(args, "jobs", None) not in (None, 1):
        return None
    from .eventdecode import native_enabled
    from .readahead import start
    from .tracefiles import single_trace_file

    if not native_enabled():  # (DYNO_NATIVE_PARSE=0: the decode would hold the GIL, nothing would overlap)
        return None
    path = single_trace_file(args.paths)
    return None if path is None else start(path)


def _sigterm_as_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m dyno.trace_analysis", description=DESCRIPTION)
    add_analyze_arguments(parser)
    args = parse_args(parser, sys.argv[1:] if argv is None else argv)
    # SIGTERM (`timeout 60 python -m dyno.trace_analysis ...`) ends it as Ctrl-C does, exit 130, as under dyno-cli,
    # whose EXIT_CODES these are; only from the main thread with SIGTERM's default action (an embedder's is kept)
    installed = (
        threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    )
    if installed:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return run_analyze(args, prog=parser.prog)
    except KeyboardInterrupt:  # Ctrl-C during a long load: the shell's code, no traceback (as dyno-cli)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `python -m dyno.trace_analysis T | head`: the reader left; as dyno-cli, no traceback
        # Python flushes stdout again at exit, which would report the closed pipe once more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exit_codes.OK
    finally:
        if installed:  # main() called in-process (tests, tools) leaves the caller's SIGTERM as it was
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
