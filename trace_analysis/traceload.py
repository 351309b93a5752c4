"""Load one Chrome-trace JSON file (plain or gzip) into a ``Trace``: its events streamed in blocks from
``traceopen`` through ``jsonscan`` into a ``TraceBuilder``, its metadata (rank, world size, device properties)
read once at the end. Bad content raises ``TraceLoadError`` naming what is wrong (truncated, not JSON, wrong
schema, no usable events).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dyno.gc_pause import gc_paused
from dyno.trace_analysis import readahead
from dyno.trace_analysis.builder import TraceBuilder, release_free_memory
from dyno.trace_analysis.eventbatches import Batch, EventBatches
from dyno.trace_analysis.jsonscan import BLOCK_SIZE, ScanError
from dyno.trace_analysis.model import Trace, TraceMeta
from dyno.trace_analysis.traceopen import GZIP_ERRORS, TraceLoadError, check_gzip_rest, trace_size
from dyno.trace_analysis.valueranges import out_of_range_reason

__all__ = ["load_trace", "rank_from_filename"]

logger = logging.getLogger(__name__)

# Hand freed heap pages back after loading a file of at least this much JSON. Below it, what a load frees is
# small and reused by the next allocations; malloc_trim costs 0.1-0.4 ms, a tenth of a small trace's load.
_TRIM_AFTER_BYTES = 4 * BLOCK_SIZE
_RANK_RE = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def rank_from_filename(path: str | os.PathLike[str]) -> int | None:
    """Rank number in a file name such as ``rank-3.json.gz`` or ``sampled_rank_1.json``; None if absent."""
    m = _RANK_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


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
    """Parse one Chrome-trace JSON file (plain or gzip) into a ``Trace``. Raises ``TraceLoadError``.

    The file's batches come from ``EventBatches``, or from the read-ahead ``dyno-cli analyze`` started for this
    file (``readahead``: the same batches and errors, begun while the CLI imported the analysis stack)."""
    p = Path(path)
    size = trace_size(p)
    b = TraceBuilder()
    # The cyclic GC would rescan the growing heap on every few thousand dicts orjson creates; the per-block
    # objects are freed by reference counting, so pausing it while parsing loses nothing.
    try:
        with gc_paused(), contextlib.ExitStack() as stack:
            ahead = readahead.claim(p, block_size)
            source: EventBatches
            batches: Iterator[Batch]
            if ahead is not None:
                assert ahead.source is not None  # (claimed only once its thread has the file open)
                stack.callback(ahead.close)
                source, batches = ahead.source, ahead.batches()
            else:
                source = stack.enter_context(EventBatches(p, size, block_size))
                batches = source.batches()
            result = source.result
            arrays = 1
            try:
                for batch in batches:
                    if batch.arrays != arrays:  # a repeated traceEvents key: its last value stands, as in JSON
                        b, arrays = TraceBuilder(), batch.arrays
                    b.add(batch.items, batch.batch_bytes, batch.last_batch)
                    del batch
            except ScanError:
                # damaged compressed bytes give invalid JSON: name the damage instead. A read-ahead thread may have
                # read the stream further (to a gzip error, kept for later): it stops first, and its error stands
                if ahead is not None and isinstance(gzip_error := ahead.stop(), GZIP_ERRORS):
                    raise gzip_error from None
                check_gzip_rest(source.fh)
                raise
            if result.arrays != arrays or result.last_value is not None:
                b = TraceBuilder()
                if isinstance(result.last_value, list):
                    b.add(result.last_value)
    except ScanError as e:
        raise TraceLoadError(p, str(e)) from None
    except GZIP_ERRORS as e:
        if "crc" in str(e).lower():
            raise TraceLoadError(
                p,
                f"corrupt gzip stream: the checksum of its data does not match ({e}): the compressed bytes are damaged",
            ) from None
        raise TraceLoadError(p, f"truncated or corrupt gzip stream ({e})") from None
    except OSError as e:
        raise TraceLoadError(p, f"cannot read: {e}") from None
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
