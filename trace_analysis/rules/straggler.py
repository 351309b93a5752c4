"""straggler: one rank late to collectives / slower steps than the others (cross-rank)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .base import Evidence, Finding, Severity, Skip, ThresholdValue, severity_for_share
from .context import RuleContext
from .gpu_work import is_comm_kernel

__all__ = ["Straggler", "rank_step_times"]


def rank_step_times(ctx: RuleContext) -> np.ndarray:
    return np.asarray([s.dur for s in ctx.steps], dtype=np.float64)


def _comm_time(ctx: RuleContext) -> float:
    k = ctx.kernels
    m = ctx.mask(k, is_comm_kernel)
    return float(k.dur[m].sum())


class Straggler:
    """Per-rank metric vs the median of all ranks; a rank is a straggler when it is beyond median + k×MAD.

    Metric: the mean ProfilerStep time when every rank has steps (a slow rank has longer steps); otherwise
    the time in communication kernels, negated (HTA's idea: the late rank waits least in collectives because
    every other rank waits for it there).
    """

    id = "straggler"
    title = "One rank slower than the others"
    thresholds: Mapping[str, ThresholdValue] = {"mad_factor": 2.0, "min_excess": 0.05, "min_ranks": 2}
    fix = (
        "Inspect the straggler host (dyno metrics: CPU, GPU clocks/thermal throttling, PCIe/NIC errors), look for "
        "data skew (longer samples on that rank) or extra work done only there (logging, checkpointing on rank 0)."
    )
    cross_rank = True

    def applies_ranks(self, ctxs: Sequence[RuleContext]) -> Skip | None:
        if len(ctxs) < max(int(self.thresholds["min_ranks"]), 2):
            return Skip("not applicable (needs at least 2 ranks)", None)
        if all(c.steps for c in ctxs) or all(_comm_time(c) > 0 for c in ctxs):
            return None
        return Skip("not applicable (ranks have neither ProfilerStep markers nor communication kernels)", None)

    def run_ranks(self, ctxs: Sequence[RuleContext], thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        if len(ctxs) < max(int(thresholds["min_ranks"]), 2):
            return []
        if all(c.steps for c in ctxs):
            metric = np.asarray([rank_step_times(c).mean() for c in ctxs])
            basis = "mean step time"
            late_by = metric - np.median(metric)
        else:
            comm = np.asarray([_comm_time(c) for c in ctxs])
            metric = comm
            basis = "time in communication kernels (the late rank waits least)"
            late_by = np.median(comm) - comm
        med = float(np.median(metric))
        mad = float(np.median(np.abs(metric - med)))
        limit = max(float(thresholds["mad_factor"]) * mad, float(thresholds["min_excess"]) * abs(med))
        worst = int(np.argmax(late_by))
        if late_by[worst] <= limit or late_by[worst] <= 0:
            return []
        ctx = ctxs[worst]
        share = float(late_by[worst] / med) if med else None
        counts: dict[str, float] = {f"rank_{c.rank}": float(v) for c, v in zip(ctxs, metric, strict=True)}
        counts.update({"median": med, "mad": mad, "late_by_us": float(late_by[worst])})
        return [
            Finding(
                rule_id=self.id,
                severity=severity_for_share(share, floor=Severity.LOW),
                title=f"rank {ctx.rank} is a straggler: {basis} {late_by[worst] / 1000:.2f} ms beyond the median "
                f"of {len(ctxs)} ranks (limit {limit / 1000:.2f} ms)",
                evidence=Evidence(time_lost_us=float(late_by[worst]), share=share, counts=counts),
                fix=self.fix,
                rank=ctx.rank,
            )
        ]
