"""`dyno-cli jobs`' join of the daemons' ListJobs pages into one row per job, column by column (numpy): the rows of
jobs_table.from_records, exactly, for millions of records (a fleet's) in a fraction of its time.

A columnar page (ListJobsResponse.columns) is read as arrays; a page of records (a dynod older than the columnar
form answers those) is first made columns (column_pages.columns_of), so a mixed fleet joins in one pass. Each
(job id, user) gets an integer code from one dict pass (column_pages.JobKeys); every sum, min, max and "any" over a
job's records is then an array operation over the codes. Sums add in the records' order, as from_records does, so
the floats agree to the bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dyno.client.column_pages import JobKeys, codes, columns_of, newest_first, trace_finished
from dyno.client.jobs_table import GPM_COVERED, JobRow, analysis_words, ranked
from dyno.numpy_import import import_numpy_single_threaded
from dyno.v1 import dyno_pb2

import_numpy_single_threaded()
import numpy as np  # noqa: E402

__all__ = ["from_pages"]

_I64 = np.int64
_F64 = np.float64


def from_pages(pages: Iterable[tuple[str, dyno_pb2.ListJobsResponse]]) -> list[JobRow]:
    """jobs_table.from_records of every record of the pages, each page given with the daemon that answered it (columns
    checked, as DynoClient.list_job_pages gives them: column_pages.check_page)."""
    keys = JobKeys()
    hostnames: dict[str, int] = {}
    rules: dict[str, int] = {}
    coded: list[tuple[str, dyno_pb2.JobColumns, Any]] = []  # (daemon, page, its records' sparse job codes)
    for daemon, page in pages:  # the codes, page by page
        for c in columns_of(page):
            if len(c.job_id):
                coded.append((daemon, c, keys.add(c)))
    if not keys.records:
        return []
    dense = keys.dense()
    t = _Totals(len(keys))
    by_daemon: dict[str, list[tuple[Any, Any]]] = {}
    for i, (daemon, c, sparse) in enumerate(coded):
        code = dense[sparse]
        t.add(code, c, codes(hostnames, c.hostnames, c.hostname_index), codes(rules, c.rules, c.top_rule), i)
        by_daemon.setdefault(daemon, []).append((code, np.array(c.gpus_max, _I64)))
    for daemon_pages in by_daemon.values():
        t.add_daemon(daemon_pages)
    return ranked(t.rows(keys.keys(), list(hostnames), list(rules)))


class _Totals:
    """Every job's sums, mins, maxes and "any" over its records, by job code, added page by page in the records'
    order (ufunc.at applies its operands in order: the same float sums as one record at a time)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.start = np.full(jobs, np.iinfo(_I64).max, _I64)
        self.end = np.zeros(jobs, _I64)  # from_records' max starts at 0 too
        self.running = np.zeros(jobs, bool)
        self.simulated = np.zeros(jobs, bool)
        self.gpu_s = np.zeros(jobs, _F64)
        self.busy = np.zeros(jobs, _F64)
        self.sm = np.zeros(jobs, _F64)
        self.traces = np.zeros(jobs, _I64)
        self.held = np.zeros(jobs, bool)  # some record had GPU time
        self.partial = np.zeros(jobs, bool)  # some record with GPU time had GPM over less than all of it
        self.gpus = np.zeros(jobs, _I64)
        self.host_count = np.zeros(jobs, _I64)
        self.hosts: list[Any] = []  # per page: code << _HOST_BITS | hostname id, per record
        self.analysed: list[tuple[Any, ...]] = []  # per page: (page, position, code, trace, analyzed, state, ...)

    def add(self, code: Any, c: dyno_pb2.JobColumns, host: Any, rule: Any, page: int) -> None:
        np.minimum.at(self.start, code, np.array(c.first_seen_ms, _I64))
        np.maximum.at(self.end, code, np.array(c.last_seen_ms, _I64))
        self.running[code[np.array(c.running, bool)]] = True
        self.simulated[code[np.array(c.simulated, bool)]] = True
        gpu_s = np.array(c.gpu_seconds, _F64)
        np.add.at(self.gpu_s, code, gpu_s)
        np.add.at(self.busy, code, np.array(c.busy_gpu_seconds, _F64))
        np.add.at(self.traces, code, np.array(c.traces, _I64))
        sm, gpm = np.zeros(len(code), _F64), np.zeros(len(code), _F64)
        gpm_rows = np.array(c.gpm_rows, _I64)
        sm[gpm_rows] = np.array(c.sm_active_gpu_seconds, _F64)
        gpm[gpm_rows] = np.array(c.gpm_gpu_seconds, _F64)
        np.add.at(self.sm, code, sm)
        held = gpu_s > 0
        self.held[code[held]] = True
        self.partial[code[held & (gpm < GPM_COVERED * gpu_s)]] = True
        self.hosts.append(code << _HOST_BITS | host)
        at = np.array(c.analysed_rows, _I64)
        if len(at):
            analyzed = np.array(c.analyzed_ms, _I64)
            state = np.array(c.analysis_state, _I64)
            failure = np.array(c.analysis_failure, _I64)
            share = np.array(c.top_rule_share, _F64)
            trace = trace_finished(c)
            self.analysed.append((np.full(len(at), page), at, code[at], trace, analyzed, state, failure, rule, share))

    def add_daemon(self, pages: list[tuple[Any, Any]]) -> None:
        """One daemon's records (code, gpus_max per page): the most GPUs of each of its jobs, added to the job's."""
        code = np.concatenate([c for c, _ in pages])
        gpus = np.concatenate([g for _, g in pages])
        order = np.arange(len(code))
        last = np.empty(self.jobs, _I64)
        last[code] = order
        if np.array_equal(last[code], order):  # each job once on this daemon (the usual case): no max to take
            self.gpus[code] += gpus
            self.host_count[code] += 1
            return
        jobs, at = np.unique(code, return_inverse=True)
        most = np.zeros(len(jobs), _I64)
        np.maximum.at(most, at.reshape(-1), gpus)
        self.gpus[jobs] += most
        self.host_count[jobs] += 1

    def rows(self, keys: list[tuple[str, str]], hostnames: list[str], rules: list[str]) -> Iterator[JobRow]:
        names = np.sort(np.concatenate(self.hosts))  # (a sort: faster than np.unique's hash table here)
        names = names[np.r_[True, names[1:] != names[:-1]]]
        bounds = np.searchsorted(names >> _HOST_BITS, np.arange(self.jobs + 1)).tolist()
        name_of = (names & (_HOSTS - 1)).tolist()
        analysis = self._latest_analyses(rules)
        columns = zip(
            keys,
            self.start.tolist(),
            self.end.tolist(),
            self.running.tolist(),
            self.gpu_s.tolist(),
            self.busy.tolist(),
            self.sm.tolist(),
            (self.held & ~self.partial).tolist(),
            self.traces.tolist(),
            self.simulated.tolist(),
            self.gpus.tolist(),
            self.host_count.tolist(),
            strict=True,
        )
        for j, ((job_id, user), first, last, run, gpu, busy, sm, covered, traces, sim, gpus, hc) in enumerate(columns):
            yield JobRow(
                job_id=job_id,
                user=user,
                hosts=tuple(sorted(hostnames[h] for h in name_of[bounds[j] : bounds[j + 1]])),
                host_count=hc,
                gpus=gpus,
                start_ms=first,
                end_ms=last,
                running=run,
                gpu_seconds=gpu,
                busy_gpu_seconds=busy,
                sm_active_gpu_seconds=sm if covered else None,
                traces=traces,
                simulated=sim,
                analysis=analysis.get(j, ""),
            )

    def _latest_analyses(self, rules: list[str]) -> dict[int, str]:
        """Each analysed job's newest analysis (column_pages.newest_first; the first record's of equally new ones) in
        words, by job."""
        if not self.analysed:
            return {}
        page, at, code, trace, analyzed, state, failure, rule, share = (
            np.concatenate(c) for c in zip(*self.analysed, strict=True)
        )
        order = np.lexsort((at, page, *newest_first(trace, analyzed), code))
        first = order[np.r_[True, code[order][1:] != code[order][:-1]]]
        return {
            j: analysis_words(st, f, rules[r] if r >= 0 else "", sh)
            for j, st, f, r, sh in zip(
                code[first].tolist(),
                state[first].tolist(),
                failure[first].tolist(),
                rule[first].tolist(),
                share[first].tolist(),
                strict=True,
            )
        }


_HOST_BITS = 20  # (job code, hostname id) pairs as one int64: up to 2**20 hostnames, 2**43 jobs
_HOSTS = 1 << _HOST_BITS
