"""`dyno-cli trace --summaries` and `dyno-cli fetch --summaries` once the trace is joined: follow the hosts until
their processes end (nothing fetched), wait for each host's analysis of its files, merge them into the job-wide
report (client.trace.summaries), print it as the full path does (text, --json, --html), and choose the exit code:
0 every process traced and every host merged, 3 partial, 1 no host merged, 130 interrupted."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dyno import exit_codes
from dyno.client.commands._common import JsonText, print_json, print_out
from dyno.client.commands._trace_render import render_report, say, summary_table
from dyno.client.trace.records import HostRecord
from dyno.client.trace.summaries import HostSummary, SummaryGather, merge_report
from dyno.gc_pause import gc_paused

if TYPE_CHECKING:
    from dyno.client.commands._trace_flow import TraceFlow

__all__ = ["run_summaries", "summaries_exit_code"]

_STATUS = {exit_codes.OK: "complete", exit_codes.PARTIAL: "partial", exit_codes.INTERRUPTED: "interrupted"}


def summaries_exit_code(hosts: list[HostRecord], summaries: list[HostSummary]) -> int:
    """1 when no host's analysis was merged; 3 when a host failed or matched nothing, a process did not end done,
    or a host's analysis was left out; else 0."""
    if not any(s.merged for s in summaries):
        return exit_codes.FAILURE
    procs = [p for h in hosts for p in h.processes]
    if any(h.failed for h in hosts) or any(p.state != "done" for p in procs) or not all(s.merged for s in summaries):
        return exit_codes.PARTIAL
    return exit_codes.OK


def _progress(command: str) -> Callable[[list[HostSummary]], None]:
    """A say() line each time the count of finished analyses changes."""
    last: list[int] = [-1]

    def on_poll(records: list[HostSummary]) -> None:
        done = sum(r.finished for r in records)
        if done != last[0]:
            last[0] = done
            say(f"dyno-cli {command}: host analyses finished: {done} of {len(records)}")

    return on_poll


def run_summaries(flow: TraceFlow, title: str, *, interrupted: bool = False) -> int:
    ct, args, command = flow.ct, flow.args, flow.command
    interrupted = flow.follow(title, interrupted=interrupted)
    final = ct.snapshot()
    if not args.json:
        print_out(summary_table(final))
    records: list[HostSummary] = []
    report: JsonText | None = None
    analysis_error: str | None = None
    traced = [h.host for h in final if any(p.state == "done" for p in h.processes)]
    if interrupted:
        flow.guard.discard()
        code = exit_codes.INTERRUPTED
    elif not traced:
        analysis_error = "no process finished its trace: no host has anything to analyse"
        code = exit_codes.FAILURE
    else:
        gather = SummaryGather(
            ct.cluster, ct.trace_id, traced, wait_s=args.analysis_timeout_s, unreachable_s=args.call_timeout_s
        )
        # The decoded parts (~100 objects a rank, trees) live to the end: no cyclic GC walks them until the report is
        # out (bench/summary_merge.py); nor at the exit, where cli.main() freezes what the process holds.
        try:
            with flow.guard.interruptible(), gc_paused():
                records = gather.run(on_poll=_progress(command))
                if any(r.merged for r in records):
                    report, analysis_error = render_report(args, lambda: merge_report(records))
            code = summaries_exit_code(final, records)
        except KeyboardInterrupt:
            records, code, analysis_error = gather.records, exit_codes.INTERRUPTED, "interrupted"
    _print_outcome(flow, final, records, code=code, report=report, analysis_error=analysis_error)
    return code


def _print_outcome(
    flow: TraceFlow,
    final: list[HostRecord],
    records: list[HostSummary],
    *,
    code: int,
    report: JsonText | None,
    analysis_error: str | None,
) -> None:
    """Each failed host and process, each host left out of the merge, and the outcome line, on stderr; with --json
    the trace's record, the hosts' analyses and the report as one object on stdout."""
    command = flow.command
    manifest = flow.manifest(_STATUS.get(code, "failed"), code)
    for h in final:  # the trace's own failures (nothing is fetched: a process done is not one)
        if h.failed:
            say(f"dyno-cli {command}: {h.host}: {h.error}" + (f" ({h.error_type})" if h.error_type else ""))
            continue
        for p in h.processes:
            if p.state != "done":
                say(f"dyno-cli {command}: {h.host} pid {p.pid}: {p.error or p.state}")
    for r in records:
        if not r.merged:
            say(f"dyno-cli {command}: {r.host}: not merged: {r.error or r.state}")
        elif r.thinned:
            say(f"dyno-cli {command}: {r.host}: note: its rank parts were thinned to fit (timelines, tables, examples)")
    if analysis_error:
        say(f"dyno-cli {command}: {analysis_error}")
    ranks = sum(len(r.parts) for r in records if r.merged)
    merged = sum(r.merged for r in records)
    say(
        f"dyno-cli {command}: {_STATUS.get(code, 'failed')}: report over {ranks} rank(s) from the analyses of "
        f"{merged} of {len(final)} host(s); no raw trace fetched (`dyno-cli fetch --trace-id {flow.ct.trace_id} "
        "--output-dir DIR` pulls them)"
    )
    if flow.args.json:
        print_json(
            {
                **manifest,
                "exit_code": code,
                "ok": code == 0,
                "output_dir": None,
                "summaries": [r.to_dict() for r in records],
                "report": report,
                "analysis_error": analysis_error,
                "manifest_error": None,
            }
        )
