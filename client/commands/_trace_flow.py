"""What `dyno-cli trace` and `dyno-cli fetch` share once a cluster trace is joined (trace: ClusterTrace.start(),
fetch: ClusterTrace.attach()): follow every host with live progress, fetch the files into
OUTPUT_DIR/TRACE_ID/HOST_PORT/, write manifest.json, print the per-process summary, analyze what arrived, list
what did not, and choose the exit code (0 everything arrived, 3 partial, 1 nothing, 130 interrupted). Options:
_trace_options; output checks: _trace_output; what is printed: _trace_render."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from dyno import exit_codes
from dyno.client.commands._common import print_out, proto_to_dict
from dyno.client.commands._interrupts import InterruptGuard
from dyno.client.commands._trace_render import MANIFEST_STATUS, analyze_files, print_outcome, say, summary_table
from dyno.client.trace.cluster import ClusterTrace
from dyno.client.trace.manifest import build_manifest, write_manifest
from dyno.client.trace.progress import make_progress
from dyno.client.trace.records import trace_exit_code

__all__ = ["TraceFlow"]

_REFRESH_S = 0.25


class TraceFlow:
    """Follows a joined ClusterTrace to the end for the command `command` ("trace" or "fetch"), whose options
    are `args` (add_collect_arguments' and the host options). `folder` is OUTPUT_DIR/TRACE_ID (None with
    --summaries: nothing is written); `requested_ms` when the trace was requested (the manifest's timings)."""

    def __init__(
        self, ct: ClusterTrace, args: argparse.Namespace, folder: Path | None, *, command: str, requested_ms: int
    ) -> None:
        self.ct = ct
        self.args = args
        self.folder = folder
        self.command = command
        self.requested_ms = requested_ms
        self.request = proto_to_dict(ct.request)
        # The command holds it from its first StartTrace (or GetTrace) to its end: see _interrupts.
        cleanup = "cancelling the traces and writing manifest.json" if ct.owns_trace else "writing manifest.json"
        if folder is None:  # --summaries: no manifest
            cleanup = "cancelling the traces" if ct.owns_trace else "leaving the trace running on the daemons"
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

    def follow(self, title: str, *, interrupted: bool = False) -> bool:
        """Follow every host with live progress until its processes end (fetching their files unless --summaries),
        or a Ctrl-C (then what `ct.interrupt` does); whether interrupted (already, or now)."""
        ct, command = self.ct, self.command
        start_ms = ct.request.start_time_ms if ct.request.HasField("start_time_ms") else 0
        live = False if self.args.json else None
        progress = make_progress(title, live=live, start_ms=start_ms, fetching=self.folder is not None)
        if not interrupted:
            try:
                with self.guard.interruptible():
                    ct.follow()
                    while not ct.wait(_REFRESH_S):
                        progress.update(ct.snapshot())
            except KeyboardInterrupt:
                interrupted = True
                if ct.owns_trace:
                    what = "cancelling the traces still running" + (" and writing the manifest" if self.folder else "")
                elif self.folder:
                    what = "writing the manifest (the trace goes on on the daemons)"
                else:
                    what = "the trace goes on on the daemons"
                say(f"dyno-cli {command}: interrupted: {what}")
                ct.interrupt()
        progress.close(ct.snapshot())
        return interrupted

    def run(self, title: str, *, interrupted: bool = False) -> int:
        """Follow (unless already `interrupted` while joining), then record, summarize, analyze, report.
        The "running" manifest is the caller's to write first (what to do when it cannot be written differs).
        --summaries: the hosts' analyses are merged instead (_trace_summaries); nothing is fetched or written."""
        if self.folder is None:
            from dyno.client.commands._trace_summaries import run_summaries

            return run_summaries(self, title, interrupted=interrupted)
        ct, args, folder, command = self.ct, self.args, self.folder, self.command
        interrupted = self.follow(title, interrupted=interrupted)
        final = ct.snapshot()
        code = exit_codes.INTERRUPTED if interrupted else trace_exit_code(final)
        status = "interrupted" if interrupted else MANIFEST_STATUS.get(code, "failed")
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
            print_out(summary_table(final))
        if interrupted:
            self.guard.discard()  # a Ctrl-C while cancelling asked for what is being done: the end
        elif files and not args.no_analyze:
            try:
                with self.guard.interruptible():
                    report, analysis_error = analyze_files(args, files)
            except KeyboardInterrupt:  # only the analysis stops: the files and the manifest are complete
                code, analysis_error = exit_codes.INTERRUPTED, "interrupted"
        print_outcome(
            command,
            folder,
            ct.trace_id,
            final,
            result,
            code=code,
            status=status,
            files=files,
            report=report,
            analysis_error=analysis_error,
            manifest_error=manifest_error,
            json_out=args.json,
        )
        return code
