"""A job of many ranks on every core: one process per core, each loading and analysing one rank at a time.

A worker returns the rank's ``api.RankPart`` (its summary, its per-rank rules' outcomes and findings, the digest
the cross-rank rules read) and lets the trace go; this process keeps only the parts, then runs the cross-rank step
(``api.report_of``). Memory is thus the workers' one trace each plus the small parts, whatever the number of ranks,
and the time grows with the ranks' total size divided by the cores.

The report is the one ``analyze`` gives in one process. The pool takes the usual layout only: every file loaded
names its rank (``distributedInfo`` or its file name), each rank once. Files that the loader must sort out first
(several profiling cycles of one process, copies, duplicate ranks, files without a rank: ``load_traces``) are
left to the one-process path, which re-reads them, as is a job too small to gain from more processes.

Workers are forked (they inherit the loaded analysis stack: no start-up cost), except from a process that runs
other threads or has gRPC loaded (``dyno-cli trace`` analyses beside its channels, whose threads a fork would copy
mid-call): there they come from ``forkserver``, which re-imports the caller's main module, so a program calling
``analyze`` there needs the ``if __name__ == "__main__":`` guard (or ``workers=1``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .api import AnalysisError, RankPart, Resolved, Rules, analyze_rank, report_of
from .loader import TraceLoadError, load_or_error, trace_files
from .model import LoadError
from .report.model import LoadProblem, Report
from .rules import select_rules
from .rules.base import ThresholdValue

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["MIN_POOL_BYTES", "analyze_in_pool", "usable_cores"]

# Below this many bytes of trace files (as stored) one process is quicker: starting the pool and sending the parts
# back cost 0.1-0.3 s on the 2-core test VM (trace_filter's two ranks, 0.24 MiB: 0.07 s alone, 0.15-0.38 s pooled),
# about what one process spends on 1-2 MiB of gzip traces.
MIN_POOL_BYTES = 4 * 2**20

_RANK_NAMED = ("distributedInfo", "filename")


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a batch job's share, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def analyze_in_pool(
    paths: Sequence[str], rules: Rules, resolved: Resolved, workers: int | None = None
) -> Report | None:
    """The report on ``paths`` computed by a pool of processes, or None where the one-process path must do it
    (see the module docstring). ``workers``: processes (None: one per usable core when the traces are large
    enough); ``resolved``: ``resolve_thresholds``' answer."""
    try:
        files, errors = trace_files(paths)
    except (TraceLoadError, OSError):
        return None  # reported by the one-process path, in its words
    n = min(len(files), workers if workers is not None else usable_cores())
    if n < 2 or (workers is None and _total_bytes(files) < MIN_POOL_BYTES):
        return None
    results = _run_pool(files, [r.id for r in rules], resolved, n)
    parts: list[RankPart] = []
    for got in results:
        if isinstance(got, LoadError):
            errors.append(got)
        elif got[1] not in _RANK_NAMED:
            return None
        else:
            parts.append(got[0])
    if not parts or len({p.rank for p in parts}) != len(parts):
        return None  # nothing loaded (the one-process path says why), or duplicate ranks (it picks and reports)
    parts.sort(key=lambda p: p.rank)
    return report_of(parts, rules, resolved, [LoadProblem(e.path, e.reason) for e in errors], paths)


def _total_bytes(files: Sequence[Path]) -> int:
    total = 0
    for f in files:
        try:
            total += f.stat().st_size
        except OSError:
            pass  # reported when its worker opens it
    return total


def _run_pool(
    files: Sequence[Path], rule_ids: list[str], resolved: Resolved, n: int
) -> list[tuple[RankPart, str] | LoadError]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    thresholds = {rule: dict(th) for rule, th in resolved.items()}
    pool: Executor = ProcessPoolExecutor(
        max_workers=n,
        mp_context=multiprocessing.get_context(_start_method()),
        initializer=_init_worker,
        initargs=(rule_ids, thresholds),
    )
    with pool:
        # one file per task, in file order; a worker's MemoryError is raised here, as in one process
        try:
            return list(pool.map(_analyze_file, files, chunksize=1))
        except BrokenProcessPool as e:  # a worker killed (the kernel's OOM killer, a signal): no traceback
            raise AnalysisError(
                f"a process analysing the ranks ended abruptly (killed, or out of memory?); {len(files)} files in "
                f"{n} processes: try fewer (--jobs, or workers=) ({e})"
            ) from e


def _start_method() -> str:
    import sys
    import threading

    alone = threading.active_count() == 1 and "grpc" not in sys.modules
    return "fork" if alone and sys.platform == "linux" else "forkserver"


class _Job(msgspec.Struct, frozen=True):
    rules: Rules
    resolved: Resolved


# what every task of this worker process runs (set once per worker by _init_worker; None in the parent)
_job: _Job | None = None


def _init_worker(rule_ids: list[str], thresholds: Mapping[str, Mapping[str, ThresholdValue]]) -> None:
    global _job
    from dyno.numpy_import import import_numpy_single_threaded

    import_numpy_single_threaded()  # one OpenBLAS thread per worker: the pool already uses every core
    _job = _Job(select_rules(rule_ids) if rule_ids else (), thresholds)


def _analyze_file(path: Path) -> tuple[RankPart, str] | LoadError:
    """One file: its rank's part and where its rank came from (``TraceMeta.rank_source``), or why it failed."""
    if _job is None:
        raise RuntimeError("_analyze_file runs in a worker started by _run_pool")
    trace = load_or_error(path)
    if isinstance(trace, LoadError):
        return trace
    return analyze_rank(trace, _job.rules, _job.resolved), trace.meta.rank_source
