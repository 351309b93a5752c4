"""Load PyTorch profiler / Kineto Chrome-trace JSON (plain or gzip) into the columnar model.

``load_trace(path) -> Trace`` parses one file; ``load_traces(paths) -> MultiRankTrace`` loads a folder (or list)
of rank files, reporting bad files in ``MultiRankTrace.errors`` instead of failing. Bad input raises
``TraceLoadError`` naming the file and what is wrong (missing, empty, truncated, not JSON, wrong schema).

Memory: the file is decompressed and parsed in blocks (``jsonscan`` cuts them; the optional C extension
``_native`` decodes them into column buffers, else ``eventdecode`` into small typed structs; ``builder`` turns each
batch into numpy columns); a block's objects are dropped before the next block is read, so peak memory is the
columns plus one block (``dyno-cli analyze`` may decode up to 64 MiB of batches ahead: ``readahead``).
``DYNO_NATIVE_PARSE=0`` in the environment forces the Python decoders.

This module is the public surface and the multi-file side (assembling the ranks); the files are found by
``tracefiles``, one file is loaded by ``traceload``, and opened (gzip, pipes, devices) by ``traceopen``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from dyno.trace_analysis.builder import release_free_memory
from dyno.trace_analysis.cycles import other_process, split_cycles
from dyno.trace_analysis.model import LoadError, MultiRankTrace, Trace
from dyno.trace_analysis.tracefiles import find_trace_files, trace_paths
from dyno.trace_analysis.traceload import load_trace, rank_from_filename
from dyno.trace_analysis.traceopen import TraceLoadError

__all__ = [
    "TraceLoadError",
    "load_or_error",
    "load_trace",
    "load_traces",
    "find_trace_files",
    "trace_files",
    "rank_from_filename",
    "release_free_memory",
]

logger = logging.getLogger(__name__)


def load_traces(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> MultiRankTrace:
    """Load the ranks of one job from a folder, a file, or a list of files/folders.

    Bad files become ``LoadError`` entries; two files claiming the same rank keep the first and report the other;
    files that name no rank get the lowest free ones (``rank_source`` "order").
    Raises ``TraceLoadError`` only when nothing could be loaded and there is not a single file to report, or when a
    folder holds several dyno traces (``tracefiles.trace_paths``: not the ranks of one job).
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files, errors = trace_files(items)
    loaded: list[Trace] = []
    for f in files:
        got = load_or_error(f)
        if isinstance(got, LoadError):
            errors.append(got)
        else:
            loaded.append(got)
    # several files of one process (profiling cycles, or a copy) are not several ranks
    loaded, left_out = split_cycles(loaded)
    errors.extend(left_out)
    traces: dict[int, Trace] = {}
    unranked: list[Trace] = []
    for t in loaded:
        if t.meta.rank_source == "default":
            unranked.append(t)
        elif t.rank in traces:
            kept = traces[t.rank]
            if _RANK_TRUST[t.meta.rank_source] > _RANK_TRUST[kept.meta.rank_source]:
                # the trace's own distributedInfo outranks a rank guessed from another file's name, whatever the
                # path order: keep this one, report the other
                traces[t.rank], kept, t = t, t, kept
            source = "its distributedInfo" if kept.meta.rank_source == "distributedInfo" else "its file name"
            reason = f"duplicate rank {t.rank} (rank {t.rank} is {kept.meta.path}, by {source})"
            other = other_process(kept, t)
            if other is not None:  # not a profiling cycle of that rank, nor a copy: most likely another job
                reason += f"; recorded by another process ({other}): a trace of another job? analyse it alone"
            errors.append(LoadError(t.meta.path, reason))
        else:
            traces[t.rank] = t
    _number_unranked(unranked, traces)
    if not traces and not errors:
        raise TraceLoadError(str(items[0]) if items else "<none>", "no trace files given")
    return MultiRankTrace(traces=dict(sorted(traces.items())), errors=tuple(errors))


def trace_files(items: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[LoadError]]:
    """The trace files ``load_traces`` loads from ``items`` (files, folders), each once, in order; and a
    ``LoadError`` for each folder without any. Raises ``TraceLoadError`` for a folder of several dyno traces."""
    files, empty = trace_paths(items)
    return files, [LoadError(str(p), "folder contains no *.json / *.json.gz trace files") for p in empty]


def load_or_error(path: Path) -> Trace | LoadError:
    """``load_trace(path)``, or the ``LoadError`` that reports the file when it cannot be loaded (MemoryError is
    raised: the other ranks would not fit either)."""
    try:
        return load_trace(path)
    except TraceLoadError as e:
        logger.debug("skipping %s", e)  # collected in MultiRankTrace.errors and reported there
        return LoadError(e.path, e.reason)
    except MemoryError:
        raise
    except Exception as e:  # a loader bug on odd content: report that file, load the other ranks
        logger.debug("unexpected failure loading %s", path, exc_info=True)
        reason = f"could not be loaded ({type(e).__name__}: {e}); please report it with the file"
        return LoadError(str(path), reason)


# how much a trace's rank can be trusted, by where it came from (TraceMeta.rank_source)
_RANK_TRUST = {"distributedInfo": 2, "filename": 1, "order": 0, "default": 0}


def _number_unranked(unranked: list[Trace], traces: dict[int, Trace]) -> None:
    """Files that name no rank (no ``distributedInfo``, no rank in the file name: processes traced without
    torch.distributed) take the lowest ranks the others leave free, in path order (one such file alone is rank 0),
    so none of them is dropped as a duplicate of another."""
    free = (r for r in itertools.count() if r not in traces)
    for t in unranked:
        r = next(free)
        if r != t.rank:
            t.meta = msgspec.structs.replace(t.meta, rank=r, rank_source="order")
        traces[r] = t
