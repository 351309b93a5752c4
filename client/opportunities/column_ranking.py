"""ranking.rank's answer over the daemons' columnar ListJobs pages (columns.py), to the bit: the same merge per
(daemon, job, user), the same newest finished analysis, the same float sums in the same order, the same texts and
sort orders, for a fleet's millions of records in numpy.

Order is what makes the floats agree: a (daemon, job, user) group is numbered by its first record, a job by its
first group with GPU time, a rule by its first contribution; ufunc.at and cumsum add in that order as rank's loop
does, and the totals rank adds with sum() over its jobs are added with sum() over the same list. Python runs per
rule, per (rule, job) of a rule's contributions and per job listed: few beside the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dyno.client.column_pages import newest_first
from dyno.client.opportunities.columns import FleetColumns, read_pages
from dyno.client.opportunities.model import JobLoss, Opportunities, RuleOpportunity, Unanalysed
from dyno.client.opportunities.ranking import DEFAULT_TOP, MAX_TEXT, failure_reason
from dyno.numpy_import import import_numpy_single_threaded
from dyno.trace_analysis.rule_texts import RULE_TEXTS, RuleText
from dyno.trace_summary_pb import failure_from_proto
from dyno.v1 import dyno_pb2

import_numpy_single_threaded()
import numpy as np  # noqa: E402

__all__ = ["rank_pages"]

_DONE = dyno_pb2.ANALYSIS_STATE_DONE
_FAILED = dyno_pb2.ANALYSIS_STATE_FAILED
_I64 = np.int64
_F64 = np.float64


def rank_pages(
    pages: Iterable[tuple[str, dyno_pb2.ListJobsResponse]],
    *,
    since_s: float,
    source: str,
    top: int = DEFAULT_TOP,
    failed_hosts: Iterable[tuple[str, str]] = (),
    store_problems: Iterable[str] = (),
    texts: Mapping[str, RuleText] = RULE_TEXTS,
) -> Opportunities:
    """ranking.rank of the pages' records (each page given with its daemon; columns asked with analysis_rules and
    checked, as DynoClient.list_job_pages gives them, or records)."""
    f = read_pages(pages)
    g = _Groups(f)
    pos = g.gpu_seconds > 0  # rank leaves out jobs without GPU time (NaN too)
    hours = g.gpu_seconds / 3600.0
    state = np.r_[f.state, 0][g.analysis]  # a group without an analysis (-1): state 0 (none, too)
    done = pos & (state == _DONE)
    unknown = pos & ~done
    failed = pos & (state == _FAILED)
    jobs = len(f.jobs)
    job_done, job_unknown = np.zeros(jobs, _F64), np.zeros(jobs, _F64)
    np.add.at(job_done, g.job[done], hours[done])
    np.add.at(job_unknown, g.job[unknown], hours[unknown])
    in_pos = g.job[pos]
    seen, first = np.unique(in_pos, return_index=True)
    order = seen[np.argsort(first)].tolist()  # rank's jobs dict: by the first group with GPU time
    analysed = sum(job_done[order].tolist())
    never_hours = sum(job_unknown[order].tolist())
    listed = [_rule(f, g, r, job_done, texts, top) for r in _contributions(f, g, hours, done)]
    listed.sort(key=lambda o: (-o.recoverable_gpu_hours, o.rule))
    unknown_hours = job_unknown.tolist()
    never = [j for j in order if unknown_hours[j] > 0]
    never.sort(key=lambda j: (-unknown_hours[j], *f.jobs[j]))
    return Opportunities(
        since_s=since_s,
        source=source,
        total_gpu_hours=analysed + never_hours,
        analysed_gpu_hours=analysed,
        never_analysed_gpu_hours=never_hours,
        job_count=len(order),
        analysed_job_count=int(np.count_nonzero(job_done[order] > 0)),
        user_count=len({f.jobs[j][1] for j in order}),
        host_count=len(np.unique(g.daemon[pos])),
        rules=tuple(listed),
        unanalysed=_unanalysed(f, g, never[:top], unknown_hours, unknown, failed),
        unanalysed_job_count=len(never),
        failed_analysis_count=int(np.count_nonzero(failed)),
        failed_hosts=tuple(failed_hosts),
        store_problems=tuple(store_problems),
    )


class _Groups:
    """ranking.merged over the records: one group per (daemon, job, user), numbered by its first record; its summed
    GPU-seconds, its first non-empty hostname (else its daemon) as `host` (a code: hostnames, then daemons), and its
    newest finished analysis (`analysis`, -1: none): the newest by column_pages.newest_first (its trace's end, then
    analyzed_ms), DONE before FAILED, the first record's of equal ones."""

    def __init__(self, f: FleetColumns) -> None:
        key = f.job * max(1, len(f.daemons)) + f.daemon
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        number = np.empty(len(first), _I64)
        by_first = np.argsort(first)
        number[by_first] = np.arange(len(first), dtype=_I64)
        self.of_record = number[inverse.reshape(-1)]
        leader = first[by_first]  # each group's first record
        self.count = len(first)
        self.job = f.job[leader]
        self.daemon = f.daemon[leader]
        self.gpu_seconds = np.zeros(self.count, _F64)
        np.add.at(self.gpu_seconds, self.of_record, f.gpu_seconds)
        named = np.flatnonzero(np.array([bool(h) for h in f.hostnames] or [False], bool)[f.hostname])
        records = len(f.job)
        first_named = np.full(self.count, records, _I64)
        np.minimum.at(first_named, self.of_record[named], named)
        has_name = first_named < records
        self.host = np.where(has_name, f.hostname[np.minimum(first_named, records - 1)], len(f.hostnames) + self.daemon)
        self.host_names = f.hostnames + f.daemons
        self.analysis = self._newest(f)

    def _newest(self, f: FleetColumns) -> Any:
        newest = np.full(self.count, -1, _I64)
        finished = np.flatnonzero((f.state == _DONE) | (f.state == _FAILED))
        if not len(finished):
            return newest
        group = self.of_record[f.record[finished]]
        later = newest_first(f.trace_finished_ms[finished], f.analyzed_ms[finished])
        order = np.lexsort((f.record[finished], f.state[finished] != _DONE, *later, group))
        lead = order[np.r_[True, group[order][1:] != group[order][:-1]]]
        newest[group[lead]] = finished[lead]
        return newest


class _Entries:
    """The rules of the DONE groups' analyses that gain time (rank's `gain > 0`, NaN kept as rank keeps it), in
    rank's order (group by group, each analysis' rules in order): `at` (index in the columns' rules), `group`,
    `gain`, and the indexes of one rule's entries (`of_rule`)."""

    def __init__(self, f: FleetColumns, g: _Groups, hours: Any, done: Any) -> None:
        groups = np.flatnonzero(done)
        analyses = g.analysis[groups]
        counts = f.rule_count[analyses]
        ends = np.cumsum(counts)
        at = np.arange(int(ends[-1]) if len(ends) else 0, dtype=_I64)  # (temporaries of a fleet's size made few)
        at += np.repeat(f.rule_start[analyses] - (ends - counts), counts)
        group = np.repeat(groups.astype(np.int32), counts)
        share = f.share[at]
        share[~np.isfinite(share)] = 0.0  # rank's share: a non-number is no loss, the rest held to 0..1
        np.clip(share, 0.0, 1.0, out=share)
        gain = hours[group]
        with np.errstate(invalid="ignore"):  # an infinite GPU time x 0: NaN, as rank's float product
            gain *= share
        del share
        keep = ~(gain <= 0)
        if not keep.all():
            at, group, gain = at[keep], group[keep], gain[keep]
        self.at, self.group, self.gain = at, group, gain
        self.rule = f.rule[at]
        self.by_rule = np.argsort(self.rule, kind="stable")
        self.bounds = np.searchsorted(self.rule[self.by_rule], np.arange(len(f.rules) + 1))

    def of_rule(self, rule: int) -> Any:
        return self.by_rule[self.bounds[rule] : self.bounds[rule + 1]]


def _contributions(f: FleetColumns, g: _Groups, hours: Any, done: Any) -> Iterable[tuple[int, Any, _Entries]]:
    """Each rule with contributions, by its first (rank's rules dict), with its entries' indexes."""
    e = _Entries(f, g, hours, done)
    seen, first = np.unique(e.rule, return_index=True)
    for rule in seen[np.argsort(first)].tolist():
        yield rule, e.of_rule(rule), e


def _rule(
    f: FleetColumns,
    g: _Groups,
    contribution: tuple[int, Any, _Entries],
    job_done: Any,
    texts: Mapping[str, RuleText],
    top: int,
) -> RuleOpportunity:
    rule, mine, e = contribution
    gain = e.gain[mine]
    groups = e.group[mine]
    job = g.job[groups]
    seen, first, inverse = np.unique(job, return_index=True, return_inverse=True)
    per_job = np.zeros(len(seen), _F64)
    np.add.at(per_job, inverse.reshape(-1), gain)
    by_first = np.argsort(first).tolist()  # rank's per_job dict order
    codes, sums = seen.tolist(), per_job.tolist()
    losses = [(codes[k], sums[k]) for k in by_first]
    losses.sort(key=lambda x: (-x[1], *f.jobs[x[0]]))
    shown = losses[:top]
    hosts = _hosts_of(g, job, groups, [j for j, _ in shown])
    name = f.rules[rule]
    known = texts.get(name)
    title, fix = _texts(f, e.at[mine], gain)
    return RuleOpportunity(
        rule=name,
        title=title or (known.title if known else ""),
        fix=fix or (known.fix if known else ""),
        recoverable_gpu_hours=float(np.cumsum(gain)[-1]),
        job_count=len(losses),
        user_count=len({f.jobs[j][1] for j in codes}),
        host_count=len(np.unique(g.daemon[groups])),
        jobs=tuple(JobLoss(f.jobs[j][0], f.jobs[j][1], float(job_done[j]), s, hosts[j]) for j, s in shown),
    )


def _texts(f: FleetColumns, at: Any, gain: Any) -> tuple[str, str]:
    """rank's title and fix of a rule: of the entries that beat every earlier gain (and -1), the last non-empty."""
    before = np.fmax.accumulate(np.r_[-1.0, gain])[:-1]
    records = at[gain > before].tolist()
    title = next((t for t in (f.texts[f.title[i]] for i in reversed(records)) if t), "")
    fix = next((t for t in (f.texts[f.fix[i]] for i in reversed(records)) if t), "")
    return title[:MAX_TEXT], fix[:MAX_TEXT]


def _hosts_of(g: _Groups, job: Any, groups: Any, wanted: list[int]) -> dict[int, tuple[str, ...]]:
    """The sorted host names of each wanted job among (job, group) pairs."""
    mask = np.isin(job, wanted)
    pairs = set(zip(job[mask].tolist(), g.host[groups[mask]].tolist(), strict=True))
    out: dict[int, set[str]] = {j: set() for j in wanted}
    for j, h in pairs:
        out[j].add(g.host_names[h])
    return {j: tuple(sorted(names)) for j, names in out.items()}


def _unanalysed(
    f: FleetColumns, g: _Groups, listed: list[int], hours: list[float], unknown: Any, failed: Any
) -> tuple[Unanalysed, ...]:
    """The listed jobs' Unanalysed: the hosts of their groups without a DONE analysis, the failed ones' reasons."""
    hosts: dict[int, set[str]] = {j: set() for j in listed}
    failures: dict[int, list[tuple[str, str]]] = {j: [] for j in listed}
    mine = np.flatnonzero(unknown & np.isin(g.job, listed)).tolist()
    for group, job, host, is_failed in zip(
        mine, g.job[mine].tolist(), g.host[mine].tolist(), failed[mine].tolist(), strict=True
    ):
        hosts[job].add(g.host_names[host])
        if is_failed:
            a = int(g.analysis[group])
            reason = failure_reason(failure_from_proto(int(f.failure[a])), f.messages[f.message[a]])
            failures[job].append((g.host_names[host], reason))
    return tuple(Unanalysed(*f.jobs[j], hours[j], tuple(sorted(hosts[j])), tuple(sorted(failures[j]))) for j in listed)
