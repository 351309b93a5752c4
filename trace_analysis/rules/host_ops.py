"""Host-side rules that also apply to CPU-only traces: dataloader, optimizer, cpu-init-copy, data-parallel."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import distinct, flatnonzero
from ..analyses.intervals import union_length
from ..analyses.steps import closed_at_stop, work_end
from ..model import Cat
from ._common import BaseRule
from .base import Finding, Severity, Share, ThresholdValue, count_of
from .context import RuleContext, contained_in

__all__ = ["DataLoaderRule", "OptimizerRule", "CpuInitCopy", "DataParallelRule"]

_DATALOADER = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#.*__next__$")
_OPT_STEP = re.compile(r"^Optimizer\.step#")
_OPT_ZERO = re.compile(r"^Optimizer\.zero_grad#")
_FOREACH = re.compile(r"^aten::_(foreach|fused)_")
_SINGLE_TENSOR_PY = re.compile(r"_single_tensor_(adam|adamw|sgd|rmsprop|adagrad|adamax|nadam|radam|asgd|adadelta)")
# element-wise in-place updates that a single-tensor optimizer issues once per parameter
_PER_TENSOR_UPDATE = frozenset(
    {
        "aten::add_",
        "aten::mul_",
        "aten::addcmul_",
        "aten::addcdiv_",
        "aten::lerp_",
        "aten::sqrt",
        "aten::div_",
        "aten::sub_",
        "aten::maximum",
        "aten::sqrt_",
    }
)
_DATA_PARALLEL = re.compile(r"(?<!Distributed)DataParallel\.forward|^nn\.Module: DataParallel(_\d+)?$")
_INIT_OPS = frozenset(
    {
        "aten::fill_",
        "aten::zero_",
        "aten::normal_",
        "aten::uniform_",
        "aten::random_",
        "aten::bernoulli_",
        "aten::ones",
        "aten::zeros",
        "aten::full",
        "aten::rand",
        "aten::randn",
        "aten::randint",
        "aten::arange",
        "aten::eye",
        "aten::linspace",
    }
)


class DataLoaderRule(BaseRule):
    id = "dataloader"
    title = "Input pipeline blocks the step"
    thresholds = {"max_share": Share(0.05)}
    fix = (
        "Load batches in the background: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
        "prefetch_factor=2+); move heavy per-sample work (decoding, augmentation) out of __getitem__'s hot path."
    )
    # the iterator's class in the event name says whether worker processes already load the batches: telling a
    # user with num_workers=2 to "use num_workers>0" is no fix
    fix_workers = (
        "The DataLoader already loads in worker processes (_MultiProcessingDataLoaderIter) and the step still waits "
        "for them: raise num_workers (up to the free CPU cores), keep them between epochs (persistent_workers=True: "
        "otherwise the first batches of every epoch wait for the workers to start), raise prefetch_factor, "
        "pin_memory=True for GPU training, and make __getitem__ and collate cheaper."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        ops = ctx.cpu_ops
        sel = ctx.mask(ops, lambda n: _DATALOADER.match(n) is not None, "enumerate(") & ctx.in_window(ops)
        idx = flatnonzero(sel)
        if not idx.shape[0]:
            return []
        # inclusive time: with num_workers=0 the dataset and collate ops run as children on this thread and are
        # exactly what workers would take off the step (docs/ANALYSIS_REPORT.md)
        lost = union_length(ops.ts[idx], ops.end[idx])
        share = ctx.share(lost) or 0.0
        if share <= float(thresholds["max_share"]):
            return []
        return [
            self.finding(
                ctx,
                f"waiting for the DataLoader takes {share:.1%} of the {ctx.window_name} "
                f"({count_of(idx.shape[0], 'batch', 'batches')}, mean {lost / idx.shape[0] / 1000:.2f} ms)",
                time_lost_us=lost,
                counts={"batches": idx.shape[0], "mean_us": lost / idx.shape[0]},
                examples=ctx.longest_examples(ops, idx),
                fix=self.fix_workers if any("_MultiProcessing" in n for n in ctx.trace.names(ops.take(idx))) else None,
            )
        ]


class OptimizerRule(BaseRule):
    id = "optimizer"
    title = "Inefficient optimizer step or zero_grad"
    thresholds = {"min_per_tensor_ops": 4}
    fix_single = (
        "Use the multi-tensor or fused implementation: torch.optim.<Opt>(..., foreach=True) or fused=True "
        "(one kernel for all parameters instead of one per parameter)."
    )
    fix_zero = "Call optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0) instead of writing zeros."
    fix = fix_single

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        ops = ctx.cpu_ops
        out: list[Finding] = []
        win = ctx.in_window(ops)
        steps = flatnonzero(ctx.mask(ops, lambda n: _OPT_STEP.match(n) is not None, "Optimizer.step#") & win)
        py_single = flatnonzero(
            ctx.mask(ops, lambda n: _SINGLE_TENSOR_PY.search(n) is not None, "_single_tensor_") & win
        )
        if steps.shape[0] or py_single.shape[0]:
            per_tensor = flatnonzero(ctx.names_in(ops, _PER_TENSOR_UPDATE))
            foreach = flatnonzero(
                ctx.mask(ops, lambda n: _FOREACH.match(n) is not None, ("aten::_foreach_", "aten::_fused_"))
            )
            owner_pt = contained_in(ops.ts[per_tensor], ops.tid[per_tensor], ops, steps)
            owner_fe = contained_in(ops.ts[foreach], ops.tid[foreach], ops, steps)
            n_pt = np.bincount(owner_pt[owner_pt >= 0], minlength=steps.shape[0])
            n_fe = np.bincount(owner_fe[owner_fe >= 0], minlength=steps.shape[0])
            # apex/DeepSpeed Fused* optimizers launch multi_tensor_apply kernels without aten::_foreach_ ops
            fused_cls = ctx.mask(
                ops, lambda n: _OPT_STEP.match(n) is not None and "fused" in n.lower(), "Optimizer.step#"
            )[steps]
            single = (n_pt >= int(thresholds["min_per_tensor_ops"])) & (n_fe == 0) & ~fused_cls
            if single.any() or py_single.shape[0]:
                rows = steps[single] if single.any() else py_single
                # a call still open when the profiler stopped (an iteration trace stops it in the last call's hook)
                # counts up to its work, not through the stop
                ends = ops.end[rows].astype(float)
                for k in flatnonzero(closed_at_stop(ctx.trace, ends)):
                    ends[k] = work_end(ctx.trace, float(ops.ts[rows[k]]), ends[k])
                lost = union_length(ops.ts[rows], ends)
                name = ctx.name_of(ops, int(rows[0])).split("#")[-1]
                # counted as calls, as the summary counts its steps between them ("4 steps between 5 calls")
                calls = count_of(int(single.sum()) or rows.shape[0], "optimizer.step call")
                out.append(
                    self.finding(
                        ctx,
                        f"single-tensor optimizer ({name}): {int(n_pt[single].sum()) if single.any() else 0} "
                        f"per-parameter update ops in {calls}, "
                        "no foreach/fused kernels",
                        time_lost_us=lost,
                        counts={"optimizer_steps": int(single.sum()), "per_tensor_ops": int(n_pt[single].sum())},
                        examples=ctx.examples(ops, rows),
                        cap=Severity.MEDIUM,  # the step time is an upper bound on the gain, not the gain
                        fix=self.fix_single,
                        # printed under the cost: "lost 145 ms" alone read as what foreach=True would save
                        basis="the single-tensor optimizer steps' time, an upper bound: a foreach/fused step does "
                        "the same arithmetic and saves the per-parameter dispatch and kernel launches",
                    )
                )
        zg = flatnonzero(ctx.mask(ops, lambda n: _OPT_ZERO.match(n) is not None, "Optimizer.zero_grad#") & win)
        if zg.shape[0]:
            zeros = flatnonzero(ctx.names_in(ops, ("aten::zero_",)))
            owner = contained_in(ops.ts[zeros], ops.tid[zeros], ops, zg)
            hit = zeros[owner >= 0]
            if hit.shape[0]:
                lost = union_length(ops.ts[hit], ops.end[hit])
                out.append(
                    self.finding(
                        ctx,
                        f"zero_grad writes zeros into gradients ({count_of(hit.shape[0], 'aten::zero_ call')} in "
                        f"{count_of(zg.shape[0], 'zero_grad call')})",
                        time_lost_us=lost,
                        counts={"zero_calls": hit.shape[0], "zero_grad_calls": zg.shape[0]},
                        examples=ctx.examples(ops, hit),
                        fix=self.fix_zero,
                        basis="time in the aten::zero_ calls under zero_grad (set_to_none=True skips them)",
                    )
                )
        return out


class CpuInitCopy(BaseRule):
    id = "cpu-init-copy"
    title = "Tensor initialized on the CPU, then copied with .to()"
    thresholds = {"min_count": 1}
    fix = (
        "Create the tensor where it is used: torch.zeros(..., device='cuda', dtype=...) / torch.randn(..., "
        "device=...) instead of torch.zeros(...).to(device); the CPU fill and the host-to-device copy disappear."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        ops = ctx.cpu_ops
        to_rows = flatnonzero(ctx.names_in(ops, ("aten::to",)) & ctx.in_window(ops))
        if not to_rows.shape[0]:
            return []
        is_init = ctx.names_in(ops, _INIT_OPS)
        # the op just before each aten::to on the same thread (ops sorted by ts; skip rows that enclose the to).
        # Operators only: with with_stack=True a python_function row (`<built-in method to of Tensor ...>`)
        # encloses each aten::to and would be its "previous op", hiding every case.
        is_op = ops.cat == Cat.CPU_OP.value
        hits = []
        for tid in distinct(ops.tid[to_rows]):  # per thread: a handful
            rows = flatnonzero((ops.tid == tid) & is_op)
            pos = rows.searchsorted(to_rows[ops.tid[to_rows] == tid])
            prev = rows[np.maximum(pos - 1, 0)]
            cand = to_rows[ops.tid[to_rows] == tid]
            ok = (pos > 0) & is_init[prev] & (ops.end[prev] <= ops.ts[cand])
            if ctx.record_shapes:
                # the copied tensor has the shape the initializer produced (fill_/normal_ input 0 == to input 0)
                ok &= _first_dims(ctx, prev) == _first_dims(ctx, cand)
            hits.append(np.concatenate((cand[ok], prev[ok])).reshape(2, -1))  # np.stack of two rows
        pairs = np.concatenate(hits, axis=1) if hits else np.empty((2, 0), np.int64)
        hit, init = pairs[0], pairs[1]
        if ctx.has_gpu and hit.shape[0]:
            # on GPU traces keep only .to() calls that really copied to the device (a memcpy launch inside)
            rt = ctx.runtime
            cp = flatnonzero(ctx.mask(rt, lambda n: n.startswith("cudaMemcpy"), "cudaMemcpy"))
            owner = contained_in(rt.ts[cp], rt.tid[cp], ops, hit)
            keep = distinct(owner[owner >= 0])
            copy_time = float(rt.dur[cp[owner >= 0]].sum())
            hit, init = hit[keep], init[keep]
        else:
            copy_time = float(ops.dur[hit].sum())
        if hit.shape[0] < max(int(thresholds["min_count"]), 1):
            return []
        # cost: the CPU fill plus the copy (the .to() itself may also include one-off CUDA initialization)
        lost = float(ops.dur[init].sum()) + copy_time
        return [
            self.finding(
                ctx,
                f"{count_of(hit.shape[0], 'tensor')} filled on the CPU and then copied with .to()",
                time_lost_us=lost,
                counts={"copies": hit.shape[0]},
                examples=ctx.examples(ops, hit),
                floor=Severity.LOW if ctx.has_gpu else Severity.INFO,
                cap=Severity.MEDIUM if ctx.has_gpu else Severity.LOW,
            )
        ]


def _first_dims(ctx: RuleContext, rows: np.ndarray) -> np.ndarray:
    """Shape of input 0 per row, as a comparable string (distinct JSON strings decoded once)."""
    ids = ctx.cpu_ops.input_dims[rows]
    uniq, inv = np.unique(ids, return_inverse=True)
    decoded = []
    for i in uniq:
        dims = ctx.trace.arg_json(int(i))
        decoded.append(str(dims[0]) if isinstance(dims, list) and dims else "")  # else malformed: unknown
    return np.asarray(decoded, dtype=object)[inv] if decoded else np.empty(0, object)


_CPU_ONLY_DP = " (CPU-only trace: without GPUs it only calls the module; it costs on GPUs)"


def _is_data_parallel(name: str) -> bool:
    return _DATA_PARALLEL.search(name) is not None


class DataParallelRule(BaseRule):
    id = "data-parallel"
    title = "DataParallel, or DDP without NCCL"
    thresholds = {}
    fix = (
        "Use torch.nn.parallel.DistributedDataParallel (one process per GPU) with the NCCL backend "
        "(init_process_group('nccl')); DataParallel replicates the model every step from one Python thread."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        ops = ctx.cpu_ops
        out = []
        dp = flatnonzero(ctx.mask(ops, _is_data_parallel, "DataParallel"))
        if dp.shape[0]:
            out.append(
                self.finding(
                    ctx,
                    f"torch.nn.DataParallel in use ({count_of(dp.shape[0], 'forward call')})"
                    + ("" if ctx.has_gpu else _CPU_ONLY_DP),
                    time_lost_us=0.0,
                    counts={"forward_calls": dp.shape[0]},
                    examples=ctx.examples(ops, dp),
                    # without devices DataParallel.forward calls the module directly: no replication, no cost here
                    severity=Severity.MEDIUM if ctx.has_gpu else Severity.INFO,
                )
            )
        backend = str(ctx.trace.meta.distributed_info.get("backend", "")).lower()
        if ctx.has_gpu and backend == "gloo":
            out.append(
                self.finding(
                    ctx,
                    "distributed training on GPUs with the gloo backend",
                    counts={"world_size": int(ctx.trace.meta.world_size or 0)},
                    severity=Severity.MEDIUM,
                )
            )
        return out
