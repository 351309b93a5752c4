"""FLOP estimates (`with_flops`) in the trace file.

torch's profiler computes a FLOP estimate for the ops that have a formula (aten::mm, addmm, bmm, convolutions...)
when `with_flops=True`, but torch 2.13's Chrome-trace export writes none of them (checked on CPU, with
`torch.profiler.profile` too): they reach only `key_averages()`. So the agent reads them from the profiler's results
(`KinetoEvent.flops()`, by the event's index in `kineto_results.events()`) and adds `"flops": N` to the args of
the matching `cpu_op` events while copying the export, which numbers each op event with that same index
(`"Ev Idx": i`), as older torch versions wrote it. Streaming, in blocks of whole lines: the file is never
parsed whole.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FlopArgs", "flop_counts", "flops_note"]

log = logging.getLogger(__name__)

# kineto writes an op event's index into the profiler's event list as its last arg; the match cannot start inside a
# JSON string (a quote there is escaped)
_EVENT_INDEX = re.compile(rb'"Ev Idx": (\d+)')


def flop_counts(kineto_results: Any) -> dict[int, int]:
    """{event index: FLOP estimate} of the events with one, from a stopped profiler's `kineto_results`; {} when this
    torch has none to give."""
    counts: dict[int, int] = {}
    try:
        for index, event in enumerate(kineto_results.events()):
            flops = event.flops()
            if flops:
                counts[index] = int(flops)
    except Exception:  # an older or newer torch without KinetoEvent.flops(): the trace is written without them
        log.debug("dyno agent: no FLOP counts from this torch's profiler", exc_info=True)
        return {}
    return counts


class FlopArgs:
    """A filter for the trace copy, given whole lines (any number at once): adds `"flops": N` next to the
    `"Ev Idx": i` of each event with a count. `added` counts the events it annotated."""

    def __init__(self, counts: Mapping[int, int]) -> None:
        self._counts = counts
        self.added = 0

    def _annotate(self, match: re.Match[bytes]) -> bytes:
        flops = self._counts.get(int(match.group(1)))
        if flops is None:
            return match.group(0)
        self.added += 1
        return match.group(0) + b', "flops": ' + str(flops).encode()

    def __call__(self, chunk: bytes) -> bytes:
        return _EVENT_INDEX.sub(self._annotate, chunk)


def flops_note(counts: Mapping[int, int], args: FlopArgs | None) -> str:
    """The note of a with_flops trace whose file holds no FLOP counts (why), else ""."""
    if not counts:
        return (
            "with_flops: no op in the trace has a FLOP estimate (torch has formulas for matrix multiplications and "
            "convolutions only), so the file holds none"
        )
    if args is None or not args.added:
        return (
            f"with_flops: torch estimated FLOPs for {len(counts)} op(s) but its trace export numbers no events to "
            'attach them to (no "Ev Idx" args), so the file holds none'
        )
    return ""
