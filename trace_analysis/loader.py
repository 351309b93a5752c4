"""Load PyTorch profiler / Kineto Chrome-trace JSON (plain or gzip) into the columnar model.

``load_trace(path) -> Trace`` parses one file; ``load_traces(paths) -> MultiRankTrace`` loads a folder (or list)
of rank files, reporting bad files in ``MultiRankTrace.errors`` instead of failing. Bad input raises
``TraceLoadError`` naming the file and what is wrong (missing, empty, truncated, not JSON, wrong schema).

Memory: the file is decompressed and parsed in blocks (``jsonscan`` cuts them; the optional C extension
``_native`` decodes them into column buffers, else ``eventdecode`` into small typed structs; ``builder`` turns each
batch into numpy columns); a block's objects are dropped before the next block is read, so peak memory is the
columns plus one block. ``DYNO_NATIVE_PARSE=0`` in the environment forces the Python decoders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import gzip
import io
import itertools
import logging
import os
import re
import stat
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, Any, cast

from dyno.trace_analysis.builder import TraceBuilder, decode_batch, decode_fast, release_free_memory
from dyno.trace_analysis.cycles import other_process, split_cycles
from dyno.trace_analysis.jsonscan import BLOCK_SIZE, ScanError, ScanResult, iter_event_batches
from dyno.trace_analysis.model import LoadError, MultiRankTrace, Trace, TraceMeta
from dyno.trace_analysis.valueranges import out_of_range_reason

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

# gzip inflate: python-isal's igzip (ISA-L, ~3x faster than zlib here) when installed (the "fast" extra), else the
# standard library. Both read the same streams; only the detail of a corrupt-stream message differs.
_GZIP: ModuleType = gzip
_GZIP_ERRORS: tuple[type[BaseException], ...] = (EOFError, gzip.BadGzipFile, zlib.error)


def _member_decompressor() -> Any:
    """A decompressor of one gzip member (``decompress(data, max_length)``, ``eof``, ``unused_data``)."""
    return zlib.decompressobj(31)


try:
    from isal import igzip as _igzip
    from isal import igzip_lib as _igzip_lib
    from isal.isal_zlib import error as _isal_error

    _GZIP = _igzip
    _GZIP_ERRORS = (*_GZIP_ERRORS, cast("type[BaseException]", _isal_error))  # typed as an instance in isal

    def _member_decompressor() -> Any:
        return _igzip_lib.IgzipDecompressor(_igzip_lib.DECOMP_GZIP)

except ImportError:  # optional dependency
    pass

# Hand freed heap pages back after loading a file of at least this much JSON. Below it, what a load frees is
# small and reused by the next allocations; malloc_trim costs 0.1-0.4 ms, a tenth of a small trace's load.
_TRIM_AFTER_BYTES = 4 * BLOCK_SIZE
# errors for which Path.exists() is False: the file or a folder on its path is missing, a symlink loop
_NO_SUCH_FILE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
_RANK_RE = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


class TraceLoadError(Exception):
    """A trace file could not be loaded; ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def rank_from_filename(path: str | os.PathLike[str]) -> int | None:
    """Rank number in a file name such as ``rank-3.json.gz`` or ``sampled_rank_1.json``; None if absent."""
    m = _RANK_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


class _Prefixed(io.RawIOBase):
    """A stream's first bytes, already read, then the rest of the stream (a pipe cannot seek back to them)."""

    def __init__(self, head: bytes, rest: io.FileIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._rest.readinto(b)

    def close(self) -> None:
        self._rest.close()
        super().close()


# what stat says a path is, for the kinds of file a trace cannot be (read, they never end or cannot be opened)
_NOT_A_FILE = (
    (stat.S_ISCHR, "a character device (such as /dev/zero or a terminal), not a trace file"),
    (stat.S_ISBLK, "a block device, not a trace file"),
    (stat.S_ISSOCK, "a socket, not a trace file"),
)


def _open(path: Path, size: int | None, stack: contextlib.ExitStack[Any] | None = None) -> tuple[IO[bytes], int | None]:
    """The decompressed stream of a file of ``size`` bytes, and its expected decompressed size (a hint: gzip
    keeps only the last member's size, modulo 2**32). ``size`` None: a pipe (``/dev/stdin``, ``<(zcat t.json.gz)``),
    which can be neither reopened nor sized: it is streamed in blocks as a file is (read whole, it would have no
    bound, and a signal could not stop the read). A file of at most a block is read whole, and inflated in one call when
    it fits in a block (``_gunzip_small``). ``stack``: closes the pipe under a gzip reader (which leaves open a
    stream it was given)."""
    if size is None:
        pipe = open(path, "rb", buffering=0)
        head = b""
        while len(head) < 2:
            more = pipe.read(2 - len(head))
            if not more:
                break
            head += more
        if not head:
            pipe.close()
            raise TraceLoadError(path, "empty input")
        stream = io.BufferedReader(_Prefixed(head, pipe), BLOCK_SIZE)
        if head == b"\x1f\x8b":
            if stack is not None:
                stack.callback(stream.close)
            return cast(IO[bytes], _GZIP.open(stream, "rb")), None
        return stream, None
    with open(path, "rb") as fh:
        if size <= BLOCK_SIZE:  # a small file is read in one go (one read instead of three and a seek)
            head = data = fh.read()
        else:
            head, data = fh.read(2), b""
        if head[:2] == b"\x1f\x8b":
            hint = None
            if size >= 18:  # header and trailer
                if data:
                    hint = int.from_bytes(data[-4:], "little")
                else:
                    fh.seek(-4, os.SEEK_END)
                    hint = int.from_bytes(fh.read(4), "little")
            whole = _gunzip_small(data, hint)
            if whole is not None:
                return io.BytesIO(whole), len(whole)
            # (a small file already read streams from memory: it is not read again)
            return cast(IO[bytes], _GZIP.open(io.BytesIO(data) if data else path, "rb")), hint
        if data:
            return io.BytesIO(data), len(data)
    return open(path, "rb"), size


# how much more of a gzip stream is inflated, after its JSON failed, to reach the checksum at its end
_GZIP_CHECK_BYTES = 1 << 30


def _check_gzip_rest(fh: IO[bytes]) -> None:
    """Read a gzip stream on to its end (at most ``_GZIP_CHECK_BYTES``), so that a corrupt stream raises its gzip
    error (a CRC mismatch) rather than the invalid JSON its damaged bytes inflated to; nothing for other streams."""
    if not isinstance(fh, gzip.GzipFile):  # (isal's reader is one too)
        return
    left = _GZIP_CHECK_BYTES
    while left > 0:
        n = len(fh.read(BLOCK_SIZE))
        if not n:
            return
        left -= n


def _gunzip_small(data: bytes, hint: int | None) -> bytes | None:
    """The decompressed bytes of a small gzip file (``data``, its whole content) said to hold less than a block,
    in one call into a buffer of that size (the streaming reader's Python layers and buffer growth cost about a
    tenth of a small trace's load); None to let the streaming reader do it: a file larger than ``hint`` (several
    members: gzip keeps only the last one's size), with data after its member, truncated or corrupt (the streaming
    reader then reports it as for any file)."""
    if not data or hint is None or hint >= BLOCK_SIZE:
        return None
    d = _member_decompressor()
    try:
        out: bytes = d.decompress(data, hint + 1)
    except _GZIP_ERRORS:
        return None
    return out if d.eof and not d.unused_data else None


def _meta(path: Path, raw: dict[str, Any], b: TraceBuilder) -> TraceMeta:
    dist = raw.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank_source = "default"
    rank = dist.get("rank")
    if isinstance(rank, int):
        rank_source = "distributedInfo"
    else:
        rank = rank_from_filename(path)
        rank_source = "filename" if rank is not None else "default"
        rank = rank if rank is not None else 0
    ws = dist.get("world_size")
    props = raw.get("deviceProperties")
    base = raw.get("baseTimeNanoseconds")
    known = {"traceEvents", "distributedInfo", "deviceProperties", "trace_id", "host_name", "baseTimeNanoseconds"}
    known |= {"schemaVersion", "displayTimeUnit"}
    return TraceMeta(
        path=str(path),
        rank=int(rank),
        world_size=int(ws) if isinstance(ws, int) else None,
        rank_source=rank_source,
        distributed_info=dist,
        device_properties=tuple(p for p in props if isinstance(p, dict)) if isinstance(props, list) else (),
        trace_id=str(raw["trace_id"]) if raw.get("trace_id") is not None else None,
        host_name=str(raw["host_name"]) if raw.get("host_name") is not None else None,
        base_time_ns=int(base) if isinstance(base, (int, float)) else None,
        schema_version=raw.get("schemaVersion") if isinstance(raw.get("schemaVersion"), int) else None,
        display_time_unit=raw.get("displayTimeUnit") if isinstance(raw.get("displayTimeUnit"), str) else None,
        float_timestamps=b.float_ts,
        process_names=b.process_names,
        thread_names=b.thread_names,
        other={k: v for k, v in raw.items() if k not in known},
    )


def load_trace(path: str | os.PathLike[str], *, block_size: int = BLOCK_SIZE) -> Trace:
    """Parse one Chrome-trace JSON file (plain or gzip) into a ``Trace``. Raises ``TraceLoadError``."""
    p = Path(path)
    try:
        st = p.stat()  # (one system call for what exists(), is_dir() and stat() asked in turn)
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) and e.errno not in _NO_SUCH_FILE:
            raise
        raise TraceLoadError(p, "no such file") from None  # what Path.exists() says False to
    if stat.S_ISDIR(st.st_mode):
        raise TraceLoadError(p, "is a directory (use load_traces for a folder of ranks)")
    for is_kind, what in _NOT_A_FILE:
        if is_kind(st.st_mode):
            raise TraceLoadError(p, f"is {what}")
    size = st.st_size if stat.S_ISREG(st.st_mode) else None
    if size == 0:
        raise TraceLoadError(p, "empty file")
    b = TraceBuilder()
    result = ScanResult()
    # The cyclic GC would rescan the growing heap on every few thousand dicts orjson creates; the per-block
    # objects are freed by reference counting, so pausing it while parsing loses nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with contextlib.ExitStack() as stack:
            fh, size_hint = _open(p, size, stack)
            stack.enter_context(fh)
            arrays = 1
            try:
                for items in iter_event_batches(fh, result, block_size, decode_batch, decode_fast, size_hint):
                    if result.arrays != arrays:  # a repeated traceEvents key: its last value stands, as in JSON
                        b, arrays = TraceBuilder(), result.arrays
                    b.add(items, result.batch_bytes, result.last_batch)
                    del items
            except ScanError:
                _check_gzip_rest(fh)  # damaged compressed bytes give invalid JSON: name the damage instead
                raise
            if result.arrays != arrays or result.last_value is not None:
                b = TraceBuilder()
                if isinstance(result.last_value, list):
                    b.add(result.last_value)
    except ScanError as e:
        raise TraceLoadError(p, str(e)) from None
    except _GZIP_ERRORS as e:
        if "crc" in str(e).lower():
            raise TraceLoadError(
                p,
                f"corrupt gzip stream: the checksum of its data does not match ({e}): the compressed bytes are damaged",
            ) from None
        raise TraceLoadError(p, f"truncated or corrupt gzip stream ({e})") from None
    except OSError as e:
        raise TraceLoadError(p, f"cannot read: {e}") from None
    finally:
        if gc_was_enabled:
            gc.enable()
    raw = result.meta or {}
    if result.last_value is not None and not isinstance(result.last_value, list):
        raise TraceLoadError(p, f"wrong schema: traceEvents is {_json_type(result.last_value)}, not an array")
    if not result.found_events:
        if "traceEvents" in raw:
            raise TraceLoadError(p, f"wrong schema: traceEvents is {_json_type(raw['traceEvents'])}, not an array")
        keys = ", ".join(sorted(raw)[:8]) or "none"
        what = ""
        if isinstance(raw.get("nodes"), list) and "schema" in raw:  # often saved beside the Kineto trace
            what = (
                "; a PyTorch execution trace (ExecutionTraceObserver), not a profiler trace: analyse the Kineto trace"
            )
        raise TraceLoadError(p, f"wrong schema: no traceEvents array (top-level keys: {keys}){what}")
    if b.n_events == 0 and not b.flow_chunks and not b.instants and not b.memory:
        raise TraceLoadError(p, _no_events_reason(raw, result.n_elements))
    n_parsed = b.n_events
    trace = b.build(_meta(p, raw, b))
    del b
    if (
        n_parsed
        and not len(trace.events)
        and not len(trace.flows)
        and not len(trace.memory)
        and not len(trace.instants)
    ):
        # every complete event was dropped in build (a ts that is not a number): an empty report said "events 0"
        events = f"{n_parsed} event{'' if n_parsed == 1 else 's'}"
        raise TraceLoadError(p, f"no usable events ({events}, none with a numeric ts)")
    bad_times = out_of_range_reason(trace)
    if bad_times is not None:
        raise TraceLoadError(p, bad_times)
    if result.n_bytes >= _TRIM_AFTER_BYTES:
        release_free_memory()
    logger.debug("loaded %s: %d events, %d flows", p, len(trace.events), len(trace.flows))
    return trace


def _no_events_reason(raw: dict[str, Any], n_elements: int) -> str:
    """Why a parsed file has no event to analyse: an empty profile, or elements that are not trace events (a bare
    array of numbers or arrays is not a trace: torch's ``export_memory_timeline`` writes one). ``n_elements``
    counts the elements of the events array."""
    elements = f"{n_elements} element{'' if n_elements == 1 else 's'}"
    if "traceEvents" in raw:
        if n_elements == 0:
            return "no trace events (traceEvents is empty: nothing was profiled)"
        return f"no trace events (traceEvents has {elements}, none a complete, flow, instant or memory event)"
    found = f"{elements}, none a trace event" if n_elements else "no trace event in it"
    return (
        f"no trace events (a bare JSON array, {found}: not a Chrome trace? profile.export_memory_timeline, for "
        "one, writes arrays of numbers)"
    )


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return "a string" if isinstance(v, str) else "an object"


# written by `dyno-cli trace` beside the per-host folders; by dynod in each trace's folder (analysing the daemon's
# trace dir directly)
_NOT_TRACES = {"manifest.json", "dynod-record.json"}


def find_trace_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Trace files (``*.json`` / ``*.json.gz``) in ``folder`` and its subfolders (``dyno-cli trace`` lays files out
    as ``<trace_id>/<host>/<file>``), sorted by path; hidden files and folders (partial downloads) and manifests
    skipped, symlinked folders not followed (as ``Path.rglob``), unreadable folders skipped."""
    found: list[Path] = []
    _collect_trace_files(Path(folder), found)
    return sorted(found)


def _collect_trace_files(folder: Path, found: list[Path]) -> None:
    # os.scandir rather than Path.rglob: same files, a tenth of the time (rglob compiles a pattern and builds a
    # Path per entry; a fixed cost that showed in the load of small traces)
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return
    for e in entries:
        name = e.name
        if name.startswith("."):
            continue
        if e.is_dir(follow_symlinks=False):
            _collect_trace_files(folder / name, found)
        elif name.endswith((".json", ".json.gz")) and name not in _NOT_TRACES and e.is_file():
            found.append(folder / name)


def _refuse_several_traces(folder: Path, files: list[Path]) -> None:
    """Raise ``TraceLoadError`` when ``folder`` holds several dyno traces (``dyno-cli trace``'s output dir, or
    dynod's trace dir: one subfolder per trace id, each with its manifest or record): their files are not ranks
    of one job, and analysed together they were reported as ranks 0, 1, ... of one.

    Trace folders are told apart by their name, the trace id: a cluster trace has one id on every host, so the
    dynod folders of one trace collected from several hosts (``h1/<id>/``, ``h2/<id>/``) are its ranks."""
    roots: dict[str, Path] = {}  # by trace id (folder name; "." for files outside any trace folder): the first
    known: dict[Path, Path | None] = {}
    for f in files:
        root = _trace_root(f.parent, folder, known)
        roots.setdefault("." if root is None or root == folder else root.name, root or folder)
    if len(roots) > 1:
        names = sorted(str(r.relative_to(folder)) if r != folder else "." for r in roots.values())
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise TraceLoadError(
            folder,
            f"holds {len(names)} traces ({shown}), not the ranks of one: analyse one of them, "
            f"e.g. {folder / names[-1]}",
        )


def _trace_root(d: Path, top: Path, known: dict[Path, Path | None]) -> Path | None:
    """The outermost folder from ``top`` down to ``d`` that holds a dyno manifest or dynod record, else None
    (outermost: a daemon's trace folder copied into a host folder of a fetched trace is still that one trace)."""
    if d in known:
        return known[d]
    above = None if d == top or d.parent == d else _trace_root(d.parent, top, known)
    root = above if above is not None else (d if any((d / n).is_file() for n in _NOT_TRACES) else None)
    known[d] = root
    return root


def _distinct(files: list[Path]) -> list[Path]:
    """``files`` without repeats of one file (a folder and a file in it both given), first occurrence kept."""
    if len(files) < 2:  # (realpath costs a system call per path component)
        return files
    seen: set[str] = set()
    out = []
    for f in files:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def load_traces(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> MultiRankTrace:
    """Load the ranks of one job from a folder, a file, or a list of files/folders.

    Bad files become ``LoadError`` entries; two files claiming the same rank keep the first and report the other;
    files that name no rank get the lowest free ones (``rank_source`` "order").
    Raises ``TraceLoadError`` only when nothing could be loaded and there is not a single file to report, or when a
    folder holds several dyno traces (``_refuse_several_traces``: not the ranks of one job).
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
    files: list[Path] = []
    errors: list[LoadError] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = find_trace_files(p)
            if not found:
                errors.append(LoadError(str(p), "folder contains no *.json / *.json.gz trace files"))
            _refuse_several_traces(p, found)
            files.extend(found)
        else:
            files.append(p)
    return _distinct(files), errors


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
    torch.distributed) take the lowest ranks the others leave free, in path order; one such file alone is rank 0
    as before. They used to all be rank 0, and every one but the first was dropped as a duplicate."""
    free = (r for r in itertools.count() if r not in traces)
    for t in unranked:
        r = next(free)
        if r != t.rank:
            t.meta = dataclasses.replace(t.meta, rank=r, rank_source="order")
        traces[r] = t
