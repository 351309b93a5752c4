"""Summaries travel, not traces: each host's analysis of a trace (GetTraceSummary with the ranks' parts), waited for
while it is pending or running, and merged into the job-wide report by the cross-rank step (``api.report_of`` over
every host's parts in rank order): the straggler and the step-time spread across ranks come out as if the raw
files had been pulled and analysed here, without any of them. The engine of `dyno-cli trace --summaries` and
`dyno-cli fetch --summaries`; the command prints what it returns.

A host whose analysis failed, is disabled, did not finish in time, cannot be reached, or sent parts that do not
decode is left out with its reason (``HostSummary.error``; the report lists it among its errors); the others are
merged. dyno.trace_analysis (and numpy) is loaded when the first parts are decoded, not with this module.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dyno.client.cluster import Cluster, HostResult
from dyno.client.errors import DeadlineExceeded, Unavailable, Unimplemented
from dyno.client.hosts import Host
from dyno.gc_pause import gc_paused
from dyno.trace_summary import AnalysisState, TraceSummary
from dyno.trace_summary_pb import summary_from_proto
from dyno.v1 import dyno_pb2

if TYPE_CHECKING:
    from dyno.trace_analysis.api import RankPart, Rules
    from dyno.trace_analysis.report.model import Report

__all__ = ["HostSummary", "SummaryGather", "apply_answer", "merge_report"]

log = logging.getLogger(__name__)


# HostSummary.state: the analysis' (pending, running, done, failed, disabled) or the client's (error: no answer, or
# an answer that cannot be used; timed_out: still pending or running when the wait ended)
_WAITING = ("pending", "running")


@dataclass
class HostSummary:
    """One host's analysis of the trace, as gathered. ``parts``: its ranks' parts, decoded (merged when ``error`` is
    empty); ``thinned``: the host left per-rank detail out of them to fit the RPC (timelines, tables, examples)."""

    host: Host
    state: str = "pending"
    summary: TraceSummary | None = None
    parts: tuple[RankPart, ...] = ()
    thinned: bool = False
    error: str = ""

    @property
    def finished(self) -> bool:
        return self.state not in _WAITING

    @property
    def merged(self) -> bool:
        return self.state == "done" and not self.error and bool(self.parts)

    def to_dict(self) -> dict[str, object]:
        s = self.summary
        return {
            "host": str(self.host),
            "state": self.state,
            "error": self.error,
            "ranks": [p.rank for p in self.parts],
            "thinned": self.thinned,
            "analysis_cpu_s": s.analysis_cpu_s if s else None,
            "analysed_window": s.analysed_window if s else None,
        }


def apply_answer(h: HostSummary, answer: dyno_pb2.TraceSummary) -> None:
    """Merge one GetTraceSummary answer into ``h`` (decoding the parts of a finished analysis)."""
    s = summary_from_proto(answer)
    h.summary = s
    h.state = s.state.value.lower()
    if s.state is AnalysisState.FAILED:
        h.error = f"analysis failed ({s.failure.value}): {s.failure_message or 'no reason given'}"
    elif s.state is AnalysisState.DISABLED:
        h.error = "this dynod does not analyse traces (its analysis is disabled): leave out --summaries to fetch them"
    elif s.state is AnalysisState.DONE:
        h.thinned = answer.rank_parts_thinned
        if not answer.rank_parts:
            h.error = "its analysis sent no rank parts (too large even thinned): fetch its raw traces instead"
            return
        from dyno.trace_analysis.part_codec import PartFormatError, decode_parts

        try:
            h.parts = tuple(decode_parts(answer.rank_parts))
        except PartFormatError as e:
            h.error = f"its rank parts cannot be read: {e}"
        else:
            if not h.parts:
                h.error = "its analysis holds no rank"


def apply_failure(h: HostSummary, r: HostResult[Any], failing_s: float, unreachable_s: float) -> None:
    """A GetTraceSummary that failed: retried while the daemon is unreachable for less than ``unreachable_s``."""
    transient = r.error_type in (Unavailable.__name__, DeadlineExceeded.__name__)
    if transient and failing_s < unreachable_s:
        return
    h.state = "error"
    if r.error_type == Unimplemented.__name__:
        h.error = "this dynod cannot send trace summaries (an older version): leave out --summaries to fetch the traces"
    else:
        h.error = f"{r.error} ({r.error_type})" if r.error_type else (r.error or "no answer")


class SummaryGather:
    """Asks every host in ``hosts`` for its analysis of ``trace_id`` (with the ranks' parts), every ``poll_s``, until
    each has finished or ``wait_s`` has passed; ``unreachable_s``: how long a host may not answer before it is given
    up. ``run()`` returns the hosts' records in ``hosts``' order."""

    def __init__(
        self,
        cluster: Cluster,
        trace_id: str,
        hosts: Sequence[Host],
        *,
        wait_s: float,
        unreachable_s: float = 5.0,
        poll_s: float = 0.5,
    ) -> None:
        self.cluster = cluster
        self.trace_id = trace_id
        self.records = [HostSummary(h) for h in hosts]
        self.wait_s = wait_s
        self.unreachable_s = unreachable_s
        self.poll_s = poll_s
        self._failing_since: dict[str, float] = {}

    def poll(self) -> bool:
        """One GetTraceSummary on each host still waiting; whether every host has finished."""
        waiting = {h.host.target: h for h in self.records if not h.finished}
        if not waiting:
            return True
        results = self.cluster.call(
            lambda c: c.get_trace_summary(self.trace_id, include_rank_parts=True),
            hosts=[h.host for h in waiting.values()],
        )
        now = time.monotonic()
        with gc_paused():
            for h, r in zip(waiting.values(), results, strict=True):
                if r.ok and r.value is not None:
                    self._failing_since.pop(h.host.target, None)
                    apply_answer(h, r.value)
                else:
                    since = self._failing_since.setdefault(h.host.target, now)
                    apply_failure(h, r, now - since, self.unreachable_s)
        return all(h.finished for h in self.records)

    def run(
        self, stop: threading.Event | None = None, on_poll: Callable[[list[HostSummary]], None] | None = None
    ) -> list[HostSummary]:
        """Poll until every host has finished, ``wait_s`` has passed (the hosts still waiting are timed out), or
        ``stop`` is set. ``on_poll(records)`` after each round (the progress line)."""
        stop = stop or threading.Event()
        end = time.monotonic() + self.wait_s
        while not self.poll():
            if on_poll is not None:
                on_poll(self.records)
            if time.monotonic() >= end or stop.wait(min(self.poll_s, max(0.0, end - time.monotonic()))):
                break
        for h in self.records:
            if not h.finished:
                what = "stopped waiting" if stop.is_set() else f"not finished after {self.wait_s:g} s"
                h.error = f"analysis {h.state}: {what}"
                h.state = "timed_out"
        if on_poll is not None:
            on_poll(self.records)
        return self.records


def merge_report(hosts: Sequence[HostSummary]) -> Report:
    """The job-wide report over every merged host's parts, in rank order (the cross-rank rules run here). A host
    left out is one of the report's errors with its reason; so is a rank that a second host also sent (the first
    host's is kept). Sources read "host:path" (the file on that host)."""
    from dyno.trace_analysis.api import report_of
    from dyno.trace_analysis.report.model import LoadProblem
    from dyno.trace_analysis.rules.engine import resolve_rule_thresholds

    problems = [LoadProblem(str(h.host), h.error or h.state) for h in hosts if not h.merged]
    owner: dict[int, str] = {}
    found: list[tuple[RankPart, str]] = []
    for h in hosts:
        for p in h.parts if h.merged else ():
            source = f"{h.host}:{p.source}"
            if p.rank in owner:
                problems.append(LoadProblem(source, f"rank {p.rank} also comes from {owner[p.rank]}: left out"))
                continue
            owner[p.rank] = str(h.host)
            found.append((p, source))
    found.sort(key=lambda ps: ps[0].rank)
    rules, parts = _common_rules([p for p, _ in found])
    return report_of(parts, rules, resolve_rule_thresholds(None), problems, [s for _, s in found])


def _common_rules(parts: list[RankPart]) -> tuple[Rules, list[RankPart]]:
    """The rules to merge by and the parts with their per-rank rules in that order: the per-rank rules every part
    ran that this dyno knows (hosts of another version may run a few others), in catalogue order, and every
    cross-rank rule (they run here, over the parts' digests)."""
    from msgspec.structs import replace

    from dyno.trace_analysis.rules.engine import ALL_RULES

    if not parts:
        return (), parts
    ran = set.intersection(*({o.rule_id for o, _ in p.rules} for p in parts))
    rules = tuple(r for r in ALL_RULES if r.id in ran or getattr(r, "cross_rank", False))
    order = [r.id for r in rules if not getattr(r, "cross_rank", False)]
    at = {rule_id: i for i, rule_id in enumerate(order)}
    out = []
    for p in parts:
        if [o.rule_id for o, _ in p.rules] != order:
            kept = sorted((x for x in p.rules if x[0].rule_id in at), key=lambda x: at[x[0].rule_id])
            p = replace(p, rules=tuple(kept))
        out.append(p)
    return rules, out
