"""The daemons' ListJobs pages as the client's readers of columns take them (`dyno-cli jobs`' join,
client/jobs_columns.py; `dyno-cli opportunities`' arrays, client/opportunities/columns.py).

A daemon's page is untrusted: `check_page` (run by pages.job_pages on every page as it arrives, so every reader gets
checked pages) raises MalformedPage unless the columns the readers read agree in length and their indexes fall in
their tables. `columns_of` gives a page's columns (a page of records, from a dynod older than the columnar form,
made columns). `JobKeys` codes each record's (job id, user), first seen first: the order both readers add in, which
makes their float sums those of the record-at-a-time joins to the bit; `codes` turns a page's table indexes into
codes of the fleet's tables. `trace_finished` and `newest_first` give both readers the order of a job's analyses
that the record-at-a-time joins take (dyno.trace_summary.newness).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from dyno.client.errors import DynoError
from dyno.job_columns import job_columns
from dyno.numpy_import import import_numpy_single_threaded
from dyno.v1 import dyno_pb2

import_numpy_single_threaded()
import numpy as np  # noqa: E402

__all__ = [
    "JobKeys",
    "MalformedPage",
    "check_analyses",
    "check_columns",
    "check_page",
    "codes",
    "columns_of",
    "newest_first",
    "trace_finished",
]

_I64 = np.int64


class MalformedPage(DynoError, ValueError):
    """A daemon's columnar page whose columns do not agree (lengths, indexes out of their tables): its host failed."""


def check_page(page: dyno_pb2.ListJobsResponse, *, analyses: bool = False) -> None:
    """Raises MalformedPage unless a columnar page's columns agree (check_columns) and, with `analyses` (the page was
    asked for with analysis_rules), it has its analyses and they agree too (check_analyses); a page of records
    passes (job_columns makes it well formed)."""
    if not page.HasField("columns"):
        return
    wrong = check_columns(page.columns)
    if analyses:
        if not page.columns.HasField("analyses"):
            raise MalformedPage("a columnar ListJobs page without its analyses' rules (a dynod before analysis_rules)")
        wrong += check_analyses(page.columns)
    if wrong:
        raise MalformedPage(f"a columnar ListJobs page whose columns do not agree: {', '.join(dict.fromkeys(wrong))}")


def check_columns(c: dyno_pb2.JobColumns) -> list[str]:
    """The columns of `c` that a reader of columns reads and that do not agree: a per-record column not one entry a
    record (job_id), a per-analysis one not one entry an analysed row (analysed_rows), a GPM one not one entry a GPM
    row (gpm_rows), an index out of its table (top_rule may be -1 too: no rule); analysis_trace_finished_ms may be
    empty too (a dynod before it)."""
    n, k, g = len(c.job_id), len(c.analysed_rows), len(c.gpm_rows)
    sizes = {
        "user_index": (c.user_index, n),
        "hostname_index": (c.hostname_index, n),
        "first_seen_ms": (c.first_seen_ms, n),
        "last_seen_ms": (c.last_seen_ms, n),
        "running": (c.running, n),
        "gpus_max": (c.gpus_max, n),
        "gpu_seconds": (c.gpu_seconds, n),
        "busy_gpu_seconds": (c.busy_gpu_seconds, n),
        "traces": (c.traces, n),
        "simulated": (c.simulated, n),
        "sm_active_gpu_seconds": (c.sm_active_gpu_seconds, g),
        "gpm_gpu_seconds": (c.gpm_gpu_seconds, g),
        "analyzed_ms": (c.analyzed_ms, k),
        "analysis_state": (c.analysis_state, k),
        "analysis_failure": (c.analysis_failure, k),
        "top_rule": (c.top_rule, k),
        "top_rule_share": (c.top_rule_share, k),
    }
    bounds = {
        "user_index": (c.user_index, 0, len(c.users)),
        "hostname_index": (c.hostname_index, 0, len(c.hostnames)),
        "gpm_rows": (c.gpm_rows, 0, n),
        "analysed_rows": (c.analysed_rows, 0, n),
        "top_rule": (c.top_rule, -1, len(c.rules)),
    }
    wrong = [name for name, (column, size) in sizes.items() if len(column) != size]
    if len(c.analysis_trace_finished_ms) not in (0, k):
        wrong.append("analysis_trace_finished_ms")
    return wrong + _out_of_bounds(bounds)


def check_analyses(c: dyno_pb2.JobColumns) -> list[str]:
    """The columns of `c.analyses` (asked with analysis_rules) that do not agree, as check_columns says."""
    k, a = len(c.analysed_rows), c.analyses
    counts = np.array(a.rule_count, _I64)
    rules = len(a.rule)
    sizes = {
        "analyses.rule_count": (len(counts), k),
        "analyses.failure_message_index": (len(a.failure_message_index), k),
        "analyses.rule": (rules, int(counts.sum()) if counts.min(initial=0) >= 0 else -1),
        "analyses.time_lost_share": (len(a.time_lost_share), rules),
        "analyses.title_index": (len(a.title_index), rules),
        "analyses.fix_index": (len(a.fix_index), rules),
    }
    bounds = {
        "analyses.failure_message_index": (a.failure_message_index, 0, len(a.failure_messages)),
        "analyses.rule": (a.rule, 0, len(c.rules)),
        "analyses.title_index": (a.title_index, 0, len(a.titles)),
        "analyses.fix_index": (a.fix_index, 0, len(a.fixes)),
    }
    return [name for name, (have, want) in sizes.items() if have != want] + _out_of_bounds(bounds)


def _out_of_bounds(bounds: dict[str, tuple[Any, int, int]]) -> list[str]:
    """The names whose indexes are not all in [low, size)."""
    wrong = []
    for name, (at, low, size) in bounds.items():
        values = np.array(at, _I64)
        if len(values) and not low <= values.min() <= values.max() < size:
            wrong.append(name)
    return wrong


def columns_of(page: dyno_pb2.ListJobsResponse, *, analysis_rules: bool = False) -> Iterator[dyno_pb2.JobColumns]:
    """A page's columns, or its records made columns (with `analysis_rules`, their analyses' rules too); nothing for
    a page of neither."""
    if page.HasField("columns"):
        yield page.columns
    elif page.jobs:
        yield job_columns(page.jobs, analysis_rules=analysis_rules)


def codes(table: dict[str, int], names: Iterable[str], at: Any) -> Any:
    """`at` (indexes into a page's table `names`; -1 stays -1) as int64 codes in `table` (names added as first
    seen)."""
    return np.array([table.setdefault(n, len(table)) for n in names] + [-1], _I64)[np.asarray(at, _I64)]


def trace_finished(c: dyno_pb2.JobColumns) -> Any:
    """Each analysis' analysis_trace_finished_ms (int64), 0 for all from a dynod before the column."""
    if len(c.analysis_trace_finished_ms):
        return np.array(c.analysis_trace_finished_ms, _I64)
    return np.zeros(len(c.analysed_rows), _I64)


def newest_first(trace_finished_ms: Any, analyzed_ms: Any) -> tuple[Any, Any]:
    """np.lexsort's keys (the least significant first) that put a job's analyses newest first as
    dyno.trace_summary.newness orders them: by trace_finished_ms, then analyzed_ms, the greater first. (~x = -x - 1
    reverses the order of int64s without -x's overflow at INT64_MIN, a value a daemon may send.)"""
    return ~np.asarray(analyzed_ms, _I64), ~np.asarray(trace_finished_ms, _I64)


class JobKeys:
    """The (job id, user) key of every record of the columns added, as an integer code: `add` gives the columns'
    sparse codes (a key's is the number of its first record among all added), `dense` maps them to 0..len-1 in the
    order the keys were first seen, `keys` lists them in that order. One dict pass over the keys, in C."""

    def __init__(self) -> None:
        self.records = 0  # records added
        self._users: dict[str, int] = {}
        self._index: dict[tuple[str, int], int] = {}  # (job id, user's code) -> its sparse code

    def __len__(self) -> int:
        return len(self._index)

    def add(self, c: dyno_pb2.JobColumns) -> Any:
        """The sparse codes (int64) of `c`'s records, in their order."""
        n = len(c.job_id)
        user = codes(self._users, c.users, c.user_index).tolist()
        sparse = map(self._index.setdefault, zip(c.job_id, user, strict=True), itertools.count(self.records))
        self.records += n
        return np.fromiter(sparse, _I64, n)

    def dense(self) -> Any:
        """Sparse code -> dense code: an int64 array indexed by the codes `add` gave (its other entries undefined)."""
        dense = np.empty(self.records, _I64)
        dense[np.fromiter(self._index.values(), _I64, len(self._index))] = np.arange(len(self._index), dtype=_I64)
        return dense

    def keys(self) -> list[tuple[str, str]]:
        """Each key as (job id, user), by dense code."""
        users = list(self._users)
        return [(job_id, users[user]) for job_id, user in self._index]
