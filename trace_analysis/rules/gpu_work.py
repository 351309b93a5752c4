"""exposed-comm, no-tensor-cores, unaligned-gemm and memory-pressure: what the GPU work looks like."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import distinct, flatnonzero, member
from ..analyses.gpu import KernelType, device_groups, kernel_types
from ..analyses.intervals import intersection_length, union_length
from ..model import Events
from ..units import fmt_us
from ._common import NO_GPU, BaseRule, GpuRule, clip, gpu_share_of, gpu_window
from .base import Example, Finding, Severity, Share, Skip, ThresholdValue
from .context import RuleContext

__all__ = ["ExposedComm", "NoTensorCores", "UnalignedGemm", "MemoryPressure"]

# Case-insensitive word lists. Kernel names are long ASCII templates, on which a re.I alternation costs ~30 µs a
# name; on ASCII names a substring test of the lower-cased name is the same test. Non-ASCII names keep the regex
# (re.I also folds e.g. the Kelvin sign to "k", which str.lower() on ASCII never meets).
_GEMM_WORDS = ("gemm", "conv", "cutlass", "cublas", "matmul", "fprop", "dgrad", "wgrad")
_TENSOR_CORE_WORDS = (
    "884", "1688", "16816", "161616", "s1688", "h1688", "i8816", "xmma", "hmma", "wgmma", "gmma", "imma",
    "tensorop", "tf32", "bf16", "f16", "fp16",
)  # fmt: skip
_GEMM = re.compile("|".join(_GEMM_WORDS), re.I)
_TENSOR_CORE = re.compile("|".join(_TENSOR_CORE_WORDS), re.I)
# Architecture tags of NVIDIA library kernels (cuBLAS "ampere_sgemm_...", "sm80_xmma_...", CUTLASS
# "cutlass_80_tensorop_..."): the device's compute capability when the trace has no deviceProperties (older
# PyTorch, or tools that trim metadata). A kernel built for an older architecture runs on newer GPUs, so the
# highest tag is a lower bound of the device's capability.
_ARCH_NAMES = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "ada": (8, 9), "hopper": (9, 0)}
# Matched against the lower-cased names joined by newlines: one scan instead of one per name (long templated
# names: trace_filter's 194 kernel names are 64 KB), and a lookbehind so that adjacent tags both match.
_ARCH_RX = re.compile(r"(?<![a-z0-9])(?:sm_?(\d{1,2})(\d)|cutlass_(\d{1,2})(\d)|(volta|turing|ampere|ada|hopper))_")
_MATMUL_OPS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::linear", "aten::matmul", "aten::baddbmm"})
_HALF = ("c10::Half", "c10::BFloat16", "Half", "BFloat16")


def _has_word(name: str, words: tuple[str, ...], rx: re.Pattern[str]) -> bool:
    """``rx.search(name)`` for ``rx`` = the case-insensitive alternation of ``words``."""
    if name.isascii():
        low = name.lower()
        return any(w in low for w in words)
    return rx.search(name) is not None


def _is_comm(ctx: RuleContext) -> np.ndarray:
    """Mask over ``ctx.kernels``: NCCL kernels (cached: exposed-comm and no-tensor-cores ask three times)."""

    def compute() -> np.ndarray:
        m = kernel_types(ctx.trace, ctx.kernels) == KernelType.COMMUNICATION.value
        m.setflags(write=False)
        return m

    got: np.ndarray = ctx.trace.cached(("rules.is_comm",), compute)
    return got


class ExposedComm(GpuRule):
    id = "exposed-comm"
    title = "Communication not hidden by compute"
    thresholds = {"max_share": Share(0.10)}
    fix = (
        "Overlap communication with compute: DDP bucket tuning (bucket_cap_mb), gradient accumulation with "
        "no_sync(), FSDP prefetching, or gradient compression hooks."
    )

    def applies(self, ctx: RuleContext) -> Skip | None:
        if not ctx.has_gpu:
            return NO_GPU
        if not _is_comm(ctx).any():
            return Skip("not applicable (no communication kernels)", None)
        return None

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        # HTA's comm/comp overlap over the GPU rows inside the window it divides by: the profiler steps, else the
        # GPU span; a kernel crossing an edge counts its part inside. Every GPU row in the window counts, as for
        # low-gpu-util: also those with no launching runtime call in the trace (kernels launched before the
        # profiler's CPU events begin), which HTA's launch-correlated scope leaves out
        lo, hi, of = gpu_window(ctx)
        if hi <= lo:
            return []
        rows = ctx.gpu_activity
        kt = kernel_types(ctx.trace, rows)
        ts, end = clip(rows.ts, rows.end, lo, hi)
        comm = (kt == KernelType.COMMUNICATION.value) & (end > ts)
        comp = kt == KernelType.COMPUTATION.value
        # per device (a kernel on one GPU hides nothing of another's communication), then their mean, as the
        # temporal breakdown's figures
        groups = device_groups(ctx.gpu_device_of(rows))
        comm_t = overlap = 0.0
        per_device: dict[str, float] = {}
        for d, sel in groups:
            d_ts, d_end, d_comm, d_comp = (
                (ts, end, comm, comp) if sel is None else (ts[sel], end[sel], comm[sel], comp[sel])
            )
            c = union_length(d_ts[d_comm], d_end[d_comm])
            o = intersection_length(d_ts[d_comp], d_end[d_comp], d_ts[d_comm], d_end[d_comm]) if c > 0 else 0.0
            comm_t, overlap = comm_t + c, overlap + o
            if len(groups) > 1:
                per_device[f"exposed_us_gpu{d}"] = c - o
        if len(groups) > 1:
            comm_t, overlap = comm_t / len(groups), overlap / len(groups)
        if comm_t <= 0:
            return []
        exposed = comm_t - overlap
        share = exposed / (hi - lo)
        if share <= float(thresholds["max_share"]):
            return []
        idx = flatnonzero(comm)
        return [
            self.finding(
                ctx,
                f"{fmt_us(exposed)} of communication ({share:.1%} of the {of}) runs with no compute "
                f"overlapping it (overlap {overlap / comm_t:.1%} of communication time)"
                + (f"; per GPU, mean of {len(groups)} GPUs" if len(groups) > 1 else ""),
                time_lost_us=exposed,
                share=share,
                share_of=gpu_share_of(ctx),
                counts={"comm_us": comm_t, "overlap_share": overlap / comm_t, "kernels": idx.size, **per_device},
                examples=ctx.longest_examples(rows, idx, where="stream"),
            )
        ]


def capability_from_kernel_names(ctx: RuleContext) -> tuple[int, int] | None:
    """The highest architecture tag among the kernel names of ``ctx`` (see ``_ARCH_RX``), or None."""

    def compute() -> tuple[int, int] | None:
        strings = ctx.trace.strings
        names = "\n".join(strings[i] for i in ctx.trace.name_ids(ctx.kernels).tolist()).lower()
        best: tuple[int, int] | None = None
        for m in _ARCH_RX.finditer(names):
            major, minor, c_major, c_minor, arch = m.groups()
            cap = _ARCH_NAMES[arch] if arch else (int(major or c_major), int(minor or c_minor))
            best = cap if best is None or cap > best else best
        return best

    got: tuple[int, int] | None = ctx.trace.cached(("rules.capability_from_kernel_names",), compute)
    return got


def _capability(ctx: RuleContext) -> tuple[tuple[int, int] | None, bool]:
    """(compute capability of the first GPU, whether it was inferred from kernel names rather than read from
    deviceProperties)."""
    cap = ctx.device_capability(ctx.first_gpu_device)
    if cap is not None:
        return cap, False
    return capability_from_kernel_names(ctx), True


def _gemm_rows(ctx: RuleContext) -> np.ndarray:
    """Mask over ``ctx.kernels``: GEMM/convolution kernels, NCCL excluded (cached, read-only)."""

    def compute() -> np.ndarray:
        m = ctx.mask(ctx.kernels, lambda n: _has_word(n, _GEMM_WORDS, _GEMM)) & ~_is_comm(ctx)
        m.setflags(write=False)
        return m

    got: np.ndarray = ctx.trace.cached(("rules.gemm_rows",), compute)
    return got


def _any_tensor_core_gemm(ctx: RuleContext) -> bool:
    """Whether a GEMM kernel's name says it uses tensor cores. Tested on the GEMM rows' names only (a non-GEMM
    kernel's long template name costs ~5 µs against 17 words, and only ``tensor-core & gemm`` is read)."""

    def compute() -> bool:
        strings = ctx.trace.strings
        names = distinct(ctx.kernels.name[_gemm_rows(ctx)]).tolist()
        return any(_has_word(strings[i], _TENSOR_CORE_WORDS, _TENSOR_CORE) for i in names)

    got: bool = ctx.trace.cached(("rules.any_tensor_core_gemm",), compute)
    return got


class NoTensorCores(GpuRule):
    id = "no-tensor-cores"
    title = "Matrix work without tensor-core kernels"
    thresholds = {"min_capability": 7.0, "min_gemm_share": Share(0.0)}
    fix = (
        "Run matmuls/convolutions in reduced precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16) "
        "(or float16 with GradScaler), or enable TF32 on Ampere+: torch.backends.cuda.matmul.allow_tf32 = True, "
        "torch.backends.cudnn.allow_tf32 = True (torch.set_float32_matmul_precision('high'))."
    )

    def applies(self, ctx: RuleContext) -> Skip | None:
        if not ctx.has_gpu:
            return NO_GPU
        # the capability matters only for GEMMs that use no tensor cores: without GEMMs the rule has nothing to
        # flag, and one tensor-core GEMM is proof enough (either way it runs, and finds nothing)
        if _capability(ctx)[0] is None and _gemm_rows(ctx).any() and not _any_tensor_core_gemm(ctx):
            return Skip(
                "device compute capability unknown (no deviceProperties in the trace and no architecture in the "
                "kernel names)",
                None,
            )
        return None

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        k = ctx.kernels
        gemm = _gemm_rows(ctx)
        if not gemm.any() or _any_tensor_core_gemm(ctx):
            return []
        found, inferred = _capability(ctx)
        cap = found or (0, 0)
        min_cap = float(thresholds["min_capability"])
        idx = flatnonzero(gemm)
        on = ""
        if len(ctx.device_busy) > 1 and not inferred:
            # several GPUs, each with its deviceProperties entry: a process can mix generations, and a GEMM counts
            # where its own GPU has tensor cores
            dev = ctx.gpu_device_of(k.take(idx))
            caps = {d: ctx.device_capability(d) or (0, 0) for d in distinct(dev).tolist()}
            ok = [d for d, c in caps.items() if c[0] + c[1] / 10 >= min_cap]
            if not ok:
                return []
            idx = idx[member(dev, np.asarray(ok, dtype=np.int64))]
            cap = min(caps[d] for d in ok)
            mixed = len({caps[d] for d in ok}) > 1
            on = f"GPU{'s' if len(ok) > 1 else ''} {', '.join(map(str, ok))} (compute capability {'≥' if mixed else ''}"
            on += f"{cap[0]}.{cap[1]})"
        elif cap[0] + cap[1] / 10 < min_cap:
            return []
        if not on:
            on = f"a compute-capability {'≥' if inferred else ''}{cap[0]}.{cap[1]} GPU"
        gemm_t = float(k.dur[idx].sum())
        share = ctx.share(gemm_t) or 0.0
        if share < float(thresholds["min_gemm_share"]):
            return []
        return [
            self.finding(
                ctx,
                f"{idx.size} GEMM/convolution kernels ({gemm_t / 1000:.1f} ms, {share:.1%} of the window) and none "
                f"uses tensor cores on {on}"
                + (" (from kernel names: no deviceProperties in the trace)" if inferred else ""),
                counts={"gemm_kernels": idx.size, "gemm_us": gemm_t, "gemm_share": share},
                examples=ctx.longest_examples(k, idx, where="stream"),
                # the gain (often 2-8x on these kernels) is not measurable from the trace: fixed severity
                severity=Severity.MEDIUM if share >= 0.10 else Severity.LOW,
            )
        ]


class UnalignedGemm(BaseRule):
    id = "unaligned-gemm"
    title = "Half-precision matmul with dimensions not a multiple of 8"
    thresholds = {"multiple": 8}
    fix = (
        "Pad the matmul dimensions (hidden sizes, vocabulary, batch x sequence) to multiples of 8 (16 for "
        "int8/fp8) so tensor cores can be used for the whole GEMM."
    )

    def applies(self, ctx: RuleContext) -> Skip | None:
        # without matmul ops there is nothing to judge: recording shapes would change nothing, so the rule runs
        # (and finds nothing) instead of asking for a new trace
        if not ctx.record_shapes and ctx.names_in(ctx.cpu_ops, _MATMUL_OPS).any():
            return Skip(
                "no input shapes in the trace", "record shapes (torch.profiler record_shapes=True, --record-shapes)"
            )
        return None

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        ops = ctx.cpu_ops
        mult = max(int(thresholds["multiple"]), 1)
        mm = _outermost(ops, flatnonzero(ctx.names_in(ops, _MATMUL_OPS)))
        mm = mm[(ops.input_dims[mm] >= 0) & (ops.input_types[mm] >= 0)]
        if not mm.size:
            return []
        # decide per distinct (types, dims) pair: a few hundred at most
        keys = ops.input_types[mm].astype(np.int64) * (1 << 32) + ops.input_dims[mm].astype(np.int64)
        uniq, inv = np.unique(keys, return_inverse=True)
        bad_key = np.zeros(uniq.size, bool)
        half: dict[int, bool] = {}  # per distinct types string (a handful): is any of the 3 inputs half?
        for j, key in enumerate(uniq.tolist()):
            tid = key >> 32
            # shapes not as torch writes them (lists of int lists; types a list of str) are unknown, not an error
            if tid not in half:
                types = ctx.trace.arg_json(tid)
                half[tid] = isinstance(types, list) and any(isinstance(t, str) and t in _HALF for t in types[:3])
            if not half[tid]:
                continue  # the dims JSON is decoded only for half-precision calls
            dims = ctx.trace.arg_json(key & 0xFFFFFFFF)
            mats = [d for d in dims[:3] if isinstance(d, list) and len(d) >= 2] if isinstance(dims, list) else []
            bad_key[j] = any(isinstance(x, int) and x % mult for d in mats for x in d[-2:])
        bad = mm[bad_key[inv]]
        if not bad.size:
            return []
        lost = float(ops.dur[bad].sum())
        examples = [
            Example(f"{ex.name} {ctx.trace.arg_json(int(ops.input_dims[r]))}", ex.ts_us, ex.dur_us, ex.where)
            for ex, r in zip(ctx.examples(ops, bad), bad[:3], strict=False)
        ]
        return [
            self.finding(
                ctx,
                f"{bad.size} half-precision matmuls with a dimension not a multiple of {mult}"
                + ("" if ctx.has_gpu else _CPU_ONLY_GEMM),
                time_lost_us=0.0,
                counts={"matmuls": bad.size, "host_time_us": lost},
                examples=examples,
                # tensor cores are a GPU's: on a CPU-only trace this only says what the same code will do on one
                severity=Severity.LOW if ctx.has_gpu else Severity.INFO,
            )
        ]


_CPU_ONLY_GEMM = " (CPU-only trace: the padding matters for tensor cores when this code runs on a GPU)"


def _outermost(ops: Events, rows: np.ndarray) -> np.ndarray:
    """Of ``rows`` (matmul ops, sorted), those not inside another of them on the same thread: aten::linear runs
    aten::addmm, aten::matmul runs aten::mm, and each GEMM is one call."""
    if rows.shape[0] < 2:
        return rows
    order = np.lexsort((-ops.dur[rows], ops.ts[rows], ops.tid[rows]))  # by thread, start, outer first
    r = rows[order]
    tid, ts, end = ops.tid[r], ops.ts[r], ops.ts[r] + ops.dur[r]
    inner = np.zeros(r.shape[0], bool)
    for lo, hi in _runs(tid):
        reach = np.maximum.accumulate(end[lo:hi])  # the latest end among the earlier calls of this thread
        inner[lo + 1 : hi] = ts[lo + 1 : hi] < reach[:-1]
    return np.sort(r[~inner])


def _runs(a: np.ndarray) -> list[tuple[int, int]]:
    """Bounds of the runs of equal values of a sorted array."""
    cut = [0, *(flatnonzero(a[1:] != a[:-1]) + 1).tolist(), a.shape[0]]
    return list(zip(cut[:-1], cut[1:], strict=True))


class MemoryPressure(GpuRule):
    id = "memory-pressure"
    title = "GPU memory allocator near capacity"
    thresholds = {"max_share": Share(0.90)}
    fix = (
        "Lower peak memory: activation checkpointing (torch.utils.checkpoint), AMP (bf16/fp16 activations), a "
        "smaller micro-batch with gradient accumulation, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "against fragmentation."
    )

    def applies(self, ctx: RuleContext) -> Skip | None:
        if not ctx.has_gpu:
            return NO_GPU
        m = ctx.trace.memory
        if not len(m) or not ((m.device_type == 1) & (m.total_allocated >= 0)).any():
            return Skip("no GPU [memory] events in the trace", "profile memory (torch.profiler profile_memory=True)")
        gpu = (m.device_type == 1) & (m.total_allocated >= 0)
        if not any(ctx.device_memory(int(d)) for d in distinct(m.device_id[gpu]).tolist()):
            # nothing to compare the peak with: "clean" would vouch for a check that was not made
            return Skip("GPU memory capacity unknown (no deviceProperties totalGlobalMem for the devices)", None)
        return None

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        m = ctx.trace.memory
        out = []
        gpu = (m.device_type == 1) & (m.total_allocated >= 0)
        for dev in distinct(m.device_id[gpu]):
            sel = flatnonzero(gpu & (m.device_id == dev))
            cap = ctx.device_memory(int(dev))
            if not cap:
                continue
            i = sel[int(m.total_allocated[sel].argmax())]
            peak = int(m.total_allocated[i])
            share = peak / cap
            if share <= float(thresholds["max_share"]):
                continue
            out.append(
                self.finding(
                    ctx,
                    f"GPU {int(dev)} allocator peaks at {peak / 2**30:.1f} GiB, {share:.0%} of {cap / 2**30:.1f} GiB",
                    counts={"peak_bytes": peak, "capacity_bytes": cap, "peak_share": share},
                    examples=[Example("[memory] peak", float(m.ts[i]), 0.0, f"GPU {int(dev)}")],
                    severity=Severity.HIGH if share >= 0.98 else Severity.MEDIUM,
                )
            )
        return out
