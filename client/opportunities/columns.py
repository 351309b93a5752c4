"""The daemons' columnar ListJobs pages (with `analysis_rules`) read as flat numpy arrays, for ranking over a fleet's
millions of records (column_ranking.py): entry i of a per-record array is record i of all the pages, in their order;
per analysis and per rule of an analysis likewise. A page of records (a dynod older than the columnar form) is made
columns first (column_pages.columns_of), so a mixed fleet reads in one pass. Strings (job ids, users, hostnames,
rule ids, titles, fixes, failure messages) become integer codes into tables of this answer; the only per-record
Python is one dict pass over the (job id, user) keys, in C (column_pages.JobKeys).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dyno.client.column_pages import JobKeys, codes, columns_of, trace_finished
from dyno.numpy_import import import_numpy_single_threaded
from dyno.v1 import dyno_pb2

import_numpy_single_threaded()
import numpy as np  # noqa: E402

__all__ = ["FleetColumns", "read_pages"]

_I32 = np.int32
_I64 = np.int64
_F64 = np.float64


@dataclass(frozen=True)
class FleetColumns:
    """Every record of the pages. Per record: `daemon` (code in `daemons`), `job` (code in `jobs`: (job id, user),
    first seen first), `hostname` (code in `hostnames`), `gpu_seconds`. Per analysis: `record`, `trace_finished_ms`
    (0 from a dynod before the column), `analyzed_ms`, `state` and `failure` (dyno.v1 enum values), `message` (code in
    `messages`), its rules at `rule_start`, `rule_count`. Per rule: `rule` (code in `rules`), `share`
    (time_lost_share as sent), `title`, `fix` (codes in `texts`)."""

    daemons: list[str]
    jobs: list[tuple[str, str]]
    hostnames: list[str]
    rules: list[str]
    messages: list[str]
    texts: list[str]
    daemon: Any
    job: Any
    hostname: Any
    gpu_seconds: Any
    record: Any
    trace_finished_ms: Any
    analyzed_ms: Any
    state: Any
    failure: Any
    message: Any
    rule_start: Any
    rule_count: Any
    rule: Any
    share: Any
    title: Any
    fix: Any


def read_pages(pages: Iterable[tuple[str, dyno_pb2.ListJobsResponse]]) -> FleetColumns:
    """Every record of the pages (each given with the daemon that answered it; columns checked, as list_job_pages
    gives them: column_pages.check_page), as arrays (filled in place: a fleet's are millions of entries, which a join
    of per-page arrays would hold twice)."""
    read = [(daemon, c) for daemon, page in pages for c in columns_of(page, analysis_rules=True)]
    records = sum(len(c.job_id) for _, c in read)
    analyses = sum(len(c.analysed_rows) for _, c in read)
    rules = sum(len(c.analyses.rule) for _, c in read)
    f = FleetColumns(
        daemons=[],
        jobs=[],
        hostnames=[],
        rules=[],
        messages=[],
        texts=[],
        daemon=np.empty(records, _I32),
        job=np.empty(records, _I64),  # sparse codes until made dense below
        hostname=np.empty(records, _I32),
        gpu_seconds=np.empty(records, _F64),
        record=np.empty(analyses, _I64),
        trace_finished_ms=np.empty(analyses, _I64),
        analyzed_ms=np.empty(analyses, _I64),
        state=np.empty(analyses, _I32),
        failure=np.empty(analyses, _I32),
        message=np.empty(analyses, _I32),
        rule_start=np.empty(analyses, _I64),
        rule_count=np.empty(analyses, _I64),
        rule=np.empty(rules, _I32),
        share=np.empty(rules, _F64),
        title=np.empty(rules, _I32),
        fix=np.empty(rules, _I32),
    )
    daemons: dict[str, int] = {}
    keys = JobKeys()
    tables: tuple[dict[str, int], ...] = ({}, {}, {}, {})  # hostnames, rule ids, failure messages, titles and fixes
    hostnames, rule_ids, messages, texts = tables
    r = k = e = 0  # the next record, analysis and rule of the arrays
    for daemon, c in read:
        n, m, a = len(c.job_id), len(c.analysed_rows), c.analyses
        f.daemon[r : r + n] = daemons.setdefault(daemon, len(daemons))
        f.job[r : r + n] = keys.add(c)
        f.hostname[r : r + n] = codes(hostnames, c.hostnames, c.hostname_index)
        f.gpu_seconds[r : r + n] = c.gpu_seconds
        f.record[k : k + m] = np.array(c.analysed_rows, _I64) + r
        f.trace_finished_ms[k : k + m] = trace_finished(c)
        f.analyzed_ms[k : k + m] = c.analyzed_ms
        f.state[k : k + m] = c.analysis_state
        f.failure[k : k + m] = c.analysis_failure
        f.message[k : k + m] = codes(messages, a.failure_messages, a.failure_message_index)
        f.rule_count[k : k + m] = a.rule_count
        size = len(a.rule)
        f.rule[e : e + size] = codes(rule_ids, c.rules, a.rule)
        f.share[e : e + size] = a.time_lost_share
        f.title[e : e + size] = codes(texts, a.titles, a.title_index)
        f.fix[e : e + size] = codes(texts, a.fixes, a.fix_index)
        r, k, e = r + n, k + m, e + size
    f.job[:] = keys.dense()[f.job]
    np.cumsum(f.rule_count, out=f.rule_start)
    np.subtract(f.rule_start, f.rule_count, out=f.rule_start)
    f.daemons.extend(daemons)
    f.jobs.extend(keys.keys())
    for table, names in zip((f.hostnames, f.rules, f.messages, f.texts), tables, strict=True):
        table.extend(names)
    return f
