"""What a cross-rank rule reads of one rank: a few figures, not the trace.

A job's ranks are analysed one at a time (or one per core, ``trace_analysis.rank_pool``) and each trace is let go
once its rank is done; the cross-rank step then compares the ranks' digests, so memory does not grow with the
number of ranks.
"""

from __future__ import annotations

import logging

import msgspec

from ..analyses.ranks import RankTiming, rank_timing
from .context import RuleContext

__all__ = ["RankDigest"]

logger = logging.getLogger(__name__)


class RankDigest(msgspec.Struct, frozen=True):
    rank: int
    span: tuple[float, float]  # the rank's trace span (µs): where its findings' examples are placed
    timing: RankTiming | None  # mean step, time in collectives, window (analyses.ranks); None: ``error``
    error: str | None = None  # why the figures could not be computed: the cross-rank rules' error outcome

    @classmethod
    def of(cls, ctx: RuleContext) -> RankDigest:
        try:
            return cls(ctx.rank, ctx.span, rank_timing(ctx.trace))
        except Exception as e:  # noqa: BLE001 - reported as the cross-rank rules' error, as a rule's own failure
            logger.exception("rank %s: cross-rank figures failed", ctx.rank)
            return cls(ctx.rank, ctx.span, None, f"{type(e).__name__}: {e}")
