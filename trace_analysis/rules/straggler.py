"""straggler: one rank late to collectives / slower steps than the others (cross-rank).

Reads ``analyses.ranks.spread_of`` over the ranks' digests: per rank the mean step time and the time in
collectives (NCCL kernels, else host-side gloo/nccl ranges); a rank is a straggler when its step time is beyond
median + k×MAD, or when it spends the least time in collectives while the others wait there for it (the time lost
is their wait).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analyses.ranks import spread_of
from .base import Evidence, Finding, Severity, Share, Skip, ThresholdValue, severity_for_share
from .digest import RankDigest

__all__ = ["Straggler"]


class Straggler:
    id = "straggler"
    title = "One rank slower than the others"
    thresholds = {"mad_factor": 2.0, "min_excess": Share(0.05)}  # of the median step / of the window
    fix = (
        "Inspect the straggler host (dyno metrics: CPU, GPU clocks/thermal throttling, PCIe/NIC errors), look for "
        "data skew (longer samples on that rank) or extra work done only there (logging, checkpointing on rank 0)."
    )
    cross_rank = True

    def applies_ranks(self, ranks: Sequence[RankDigest]) -> Skip | None:
        if len(ranks) < 2:
            return Skip("not applicable (needs at least 2 ranks)", None)
        return None

    def run_ranks(self, ranks: Sequence[RankDigest], thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        spread = spread_of(
            [r.timing for r in ranks if r.timing is not None],  # the engine runs no rule on a failed digest
            mad_k=float(thresholds["mad_factor"]),
            min_rel_spread=float(thresholds["min_excess"]),
        )
        counts: dict[str, float] = {}
        for t in spread.ranks:
            counts[f"rank_{t.rank}_mean_step_us"] = t.mean_step_us
            counts[f"rank_{t.rank}_comm_us"] = t.comm_us
        counts.update({"median_step_us": spread.median_step_us, "mad_step_us": spread.mad_step_us})
        by_rank = {t.rank: t for t in spread.ranks}
        out = []
        for rank in spread.stragglers:
            t = by_rank[rank]
            late_by = spread.lost_us[rank]  # over the window it is lost in (every step), as the share below
            window = spread.lost_window_us.get(rank, t.window_us)
            share = late_by / window if window > 0 else None
            out.append(
                Finding(
                    rule_id=self.id,
                    severity=severity_for_share(share, floor=Severity.LOW),
                    title=f"rank {rank} is a straggler among {len(ranks)} ranks: {spread.reasons[rank]}",
                    evidence=Evidence(time_lost_us=late_by, share=share, counts=dict(counts)),
                    fix=self.fix,
                    rank=rank,
                )
            )
        return out
