"""tiny-ops: a Python loop of many tiny tensor ops per step (Python-level op overhead).

The ops Python itself called are the top-level CPU ops (``cpu_op`` rows with no enclosing ``cpu_op`` on their
thread: ``aten::add``, not the ``aten::empty`` inside it). A loop of small tensor ops shows as many of them per
step, each a few µs, with a few µs of Python between each and the next: the step's host time goes to dispatch and
interpreter overhead, not to work. The loop's time = the tiny top-level ops (inclusive) plus the gaps between two
consecutive tiny top-level ops of a thread up to ``max_gap_us`` (the Python between them).

Time lost: on a CPU-only trace that loop time (an upper bound on what vectorizing or compiling it saves). On a GPU
trace op overhead costs only while the GPU waits for the host: the compute stream's host_wait idle in the window
(host-bound's figure), at most the loop time; 0 when the host runs ahead of the GPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import flatnonzero, median
from ..analyses.cpu_ops import op_parents
from ..model import Cat
from ..units import fmt_us
from ._common import BaseRule
from .base import Example, Finding, Severity, Share, ThresholdValue
from .context import RuleContext
from .host_bound import compute_stream_idle

__all__ = ["TinyOps"]


class TinyOps(BaseRule):
    id = "tiny-ops"
    title = "Many tiny ops per step (Python-level op overhead)"
    thresholds = {"min_ops_per_step": 500, "max_op_us": 50.0, "max_gap_us": 50.0, "min_share": Share(0.20)}
    fix = (
        "Take the per-op overhead out of the loop: vectorize it (one batched tensor op over all elements or items "
        "instead of one small op each; torch.stack/cat the inputs, index with tensors, not Python loops), or "
        "compile it (torch.compile fuses the small ops and removes their dispatch); on a GPU, replay the step "
        "with CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs)."
    )
    basis_cpu = "host time of the tiny ops and the Python between them (at most what vectorizing saves)"
    basis_gpu = "the compute stream's wait for the host in the window (host_wait idle), at most the loop's time"

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        trace = ctx.trace
        ops = trace.events_of(Cat.CPU_OP)
        if not len(ops):
            return []
        max_op, max_gap = float(thresholds["max_op_us"]), float(thresholds["max_gap_us"])
        top = flatnonzero((op_parents(trace) < 0) & ctx.in_window(ops))
        if not top.size:
            return []
        # by thread, then start: consecutive top-level ops of one thread
        top = top[np.lexsort((ops.ts[top], ops.tid[top], ops.pid[top]))]
        ts, dur = ops.ts[top], ops.dur[top]
        tiny = dur <= max_op
        n_steps = max(len(ctx.steps), 1)
        n_tiny = int(tiny.sum())
        per_step = n_tiny / n_steps
        if per_step < int(thresholds["min_ops_per_step"]):
            return []
        same = (ops.tid[top][1:] == ops.tid[top][:-1]) & (ops.pid[top][1:] == ops.pid[top][:-1])
        gap = ts[1:] - (ts[:-1] + dur[:-1])
        between = same & tiny[1:] & tiny[:-1] & (gap >= 0) & (gap <= max_gap)
        ops_us = float(dur[tiny].sum())
        python_us = float(gap[between].sum())
        loop_us = ops_us + python_us
        loop_share = ctx.share(loop_us) or 0.0
        if loop_share < float(thresholds["min_share"]):
            return []
        # the most frequent names, each with its calls per step (those called at least once a step)
        names = [(n, c) for n, c in Counter(ops.name[top[tiny]].tolist()).most_common(3) if c >= n_steps]
        what = ", ".join(f"{trace.strings[n]} ×{c / n_steps:,.0f}" for n, c in names)
        med = median(dur[tiny])
        per = "per step" if ctx.steps else "in the trace span"
        title = (
            f"{per_step:,.0f} tiny CPU ops {per} (median {med:.1f} µs; {what}) and the Python between them take "
            f"{fmt_us(loop_us)}, {loop_share:.1%} of the {ctx.window_name}"
        )
        counts: dict[str, float] = {
            "tiny_ops": n_tiny,
            "tiny_ops_per_step": per_step,
            "top_level_ops": int(top.size),
            "median_op_us": med,
            "ops_us": ops_us,
            "python_between_us": python_us,
            "loop_us": loop_us,
            "loop_share": loop_share,
        }
        basis, lost, no_loss, severity = self.basis_cpu, loop_us, None, None
        if ctx.has_gpu:
            split = compute_stream_idle(ctx)
            host_wait = split.host_wait_us if split is not None else 0.0
            counts["compute_stream_host_wait_us"] = host_wait
            basis, lost = self.basis_gpu, min(loop_us, host_wait)
            if lost <= 0:
                no_loss = "the GPU never waits for the host: the op overhead is hidden behind queued GPU work"
                severity = Severity.INFO
        first = int(top[tiny][0])
        examples = [
            Example(f"first tiny op of the loop: {trace.strings[int(ops.name[first])]}", float(ops.ts[first]),
                    float(ops.dur[first]), f"pid {int(ops.pid[first])} tid {int(ops.tid[first])}"),
            *ctx.longest_examples(ops, top[tiny], limit=2),
        ]  # fmt: skip
        return [
            self.finding(
                ctx,
                title,
                time_lost_us=lost,
                counts=counts,
                examples=examples,
                basis=basis,
                no_loss_reason=no_loss,
                severity=severity,
            )
        ]
