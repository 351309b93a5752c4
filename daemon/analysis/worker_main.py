"""`python -m dyno.daemon.analysis.worker_main --trace-id ID --out DIR FILE...`: dynod's analysis worker.

Analyses one trace's files (dyno.trace_analysis.host_summary.summarize_trace) and writes into DIR, which dynod made
and reads back as untrusted output (outcome.py): `summary.json` (TraceSummary.to_json, plus "rank_parts_thinned")
and `rank_parts.bin` when done; `failure.txt` (one line) with exit status NO_TRACE_EXIT when no file loads and
OUT_OF_MEMORY_EXIT on MemoryError. Any other end is a crash, which dynod reports with this process's stderr's tail.
dynod starts it through dyno.daemon.analysis.limits (niced, its memory and file sizes capped) and kills it past its
timeout; only this process imports dyno.trace_analysis (and numpy), never dynod.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "FAILURE_FILE",
    "NO_TRACE_EXIT",
    "OUT_OF_MEMORY_EXIT",
    "PARTS_FILE",
    "SUMMARY_FILE",
    "THINNED_KEY",
    "main",
]

SUMMARY_FILE = "summary.json"
PARTS_FILE = "rank_parts.bin"
FAILURE_FILE = "failure.txt"
THINNED_KEY = "rank_parts_thinned"
NO_TRACE_EXIT = 3
OUT_OF_MEMORY_EXIT = 4
_MAX_FAILURE_CHARS = 1000


def _fail(out: Path, message: str, code: int) -> int:
    (out / FAILURE_FILE).write_text(message[:_MAX_FAILURE_CHARS] + "\n", encoding="utf-8")
    return code


def regular_files(files: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the files the trace manager's check still believes, the others' "PATH why"): a FIFO or device planted in
    place of a trace file would block the loader (which streams pipes, for `dyno-cli analyze <(zcat ...)`) until
    the timeout, holding up every trace queued behind it (dyno.daemon.tracing.trust.trainer_file_check)."""
    from dyno.daemon.tracing.trust import trainer_file_check

    kept, refused = [], []
    for f in files:
        st, why = trainer_file_check(Path(f))
        if st is not None:
            kept.append(f)
        else:
            refused.append(why)
    return kept, refused


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dyno.daemon.analysis.worker_main")
    p.add_argument("--trace-id", required=True)
    p.add_argument("--out", type=Path, required=True, help="the folder dynod reads the result from")
    p.add_argument("files", nargs="*", help="the trace's files (one per process)")
    args = p.parse_args(argv)
    out: Path = args.out
    try:
        from dyno.trace_analysis.api import AnalysisError
        from dyno.trace_analysis.host_summary import summarize_trace

        files, refused = regular_files(args.files)
        if not files:
            return _fail(out, "no trace file to analyse (" + "; ".join(refused or ["none given"]) + ")", NO_TRACE_EXIT)
        try:
            result = summarize_trace(files, trace_id=args.trace_id)
        except AnalysisError as e:
            return _fail(out, str(e) or "no file of the trace could be loaded", NO_TRACE_EXIT)
        doc = result.summary.to_json()
        doc[THINNED_KEY] = bool(result.thinned)
        (out / PARTS_FILE).write_bytes(result.rank_parts)
        (out / SUMMARY_FILE).write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")
    except MemoryError:
        return _fail(out, "the analysis ran out of its memory (analysis_memory_mb)", OUT_OF_MEMORY_EXIT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
