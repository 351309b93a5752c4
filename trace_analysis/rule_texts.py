"""Each antipattern rule's title and fix in words, by rule id, without the rules themselves: what a reader of
host-side summaries (``dyno-cli opportunities``, which may only have rule ids from Prometheus) shows, with no numpy
loaded. The rules (``dyno.trace_analysis.rules``) stay the source: a test holds this table equal to their
``title`` and ``fix`` (tests/unit/trace_analysis/test_rule_texts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULE_TEXTS", "RuleText"]


@dataclass(frozen=True)
class RuleText:
    title: str
    fix: str


# Catalogue order (ANTIPATTERNS.md, dyno.trace_analysis.rules.ALL_RULES).
RULE_TEXTS: dict[str, RuleText] = {
    "low-gpu-util": RuleText(
        "GPU mostly idle",
        (
            "Find what the host does while the GPU idles (data loading, synchronizations, Python overhead) during"
            " the chunks in the examples; overlap input loading with compute (DataLoader workers, pin_memory); "
            "raise the batch size."
        ),
    ),
    "gpu-starvation": RuleText(
        "Long GPU idle gaps",
        (
            "Look at what the host does during the gaps listed (their start times are in the examples): data "
            "loading, checkpointing, synchronizations or Python work; overlap it with GPU work or move it off the"
            " training thread."
        ),
    ),
    "host-bound": RuleText(
        "Kernels wait for the host",
        (
            "The GPU runs out of queued work because the host launches too slowly: use fewer, larger ops "
            "(operator fusion, torch.compile), CUDA graphs to replay launches, or a larger batch."
        ),
    ),
    "launch-overhead": RuleText(
        "Many tiny gaps between back-to-back kernels",
        (
            "Kernels are queued but each launch still costs a few µs of GPU idle: capture the step with CUDA "
            "graphs (torch.compile mode='reduce-overhead') or fuse small ops."
        ),
    ),
    "short-kernels": RuleText(
        "Kernels shorter than their launch",
        (
            "Most kernels finish before the CPU finishes launching them, so the host sets the pace: fuse small "
            "ops (torch.compile), use CUDA graphs, or give each kernel more work (larger batch)."
        ),
    ),
    "slow-runtime-calls": RuleText(
        "Slow CUDA runtime calls",
        (
            "Launch/copy calls that take this long usually wait on something: a full launch queue (see launch-"
            "queue), lock contention from other threads, or an oversubscribed host (check CPU usage). (Copies "
            "to/from pageable memory, which block by design, are left to pageable-memcpy and sync-calls.)"
        ),
    ),
    "launch-queue": RuleText(
        "Launch delay outliers or a saturated launch queue",
        (
            "Expected when the GPU is the bottleneck (work queues up). Otherwise look at what the GPU runs just "
            "before the delayed rows in the examples: a long kernel earlier on the same stream (give independent "
            "work its own torch.cuda.Stream), or a wait on another stream, often a communication kernel (overlap "
            "it with compute, see exposed-comm). A queue near 1024 launches blocks the host at each launch: "
            "launch less (CUDA graphs, fused ops)."
        ),
    ),
    "sync-calls": RuleText(
        "Blocking synchronization in the step",
        (
            "Avoid .item(), .cpu(), .tolist() and printing tensors inside the training loop (accumulate metrics "
            "on the device and read them every N steps); order streams with events (cudaStreamWaitEvent / "
            "torch.cuda.Event.wait) instead of synchronizing the host."
        ),
    ),
    "pageable-memcpy": RuleText(
        "Copies from pageable host memory",
        (
            "Copies from pageable memory are staged and cannot overlap compute: use pin_memory=True in the "
            "DataLoader (or tensor.pin_memory()) and .to(device, non_blocking=True)."
        ),
    ),
    "sync-memcpy": RuleText(
        "Synchronous memory copies",
        (
            "Use cudaMemcpyAsync on a stream (in PyTorch: tensor.to(device, non_blocking=True) from pinned "
            "memory) so the host does not block on each copy."
        ),
    ),
    "sync-memset": RuleText(
        "Synchronous memsets",
        "Use cudaMemsetAsync on a stream (PyTorch's zero_/fill_ already do); look for custom extensions.",
    ),
    "dataloader": RuleText(
        "Input pipeline blocks the step",
        (
            "Load batches in the background: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
            "prefetch_factor=2+); move heavy per-sample work (decoding, augmentation) out of __getitem__'s hot "
            "path."
        ),
    ),
    "exposed-comm": RuleText(
        "Communication not hidden by compute",
        (
            "Overlap communication with compute: DDP bucket tuning (bucket_cap_mb), gradient accumulation with "
            "no_sync(), FSDP prefetching, or gradient compression hooks."
        ),
    ),
    "no-tensor-cores": RuleText(
        "Matrix work without tensor-core kernels",
        (
            "Run matmuls/convolutions in reduced precision: torch.autocast(device_type='cuda', "
            "dtype=torch.bfloat16) (or float16 with GradScaler), or enable TF32 on Ampere+: "
            "torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True "
            "(torch.set_float32_matmul_precision('high'))."
        ),
    ),
    "unaligned-gemm": RuleText(
        "Half-precision matmul with dimensions not a multiple of 8",
        (
            "Pad the matmul dimensions (hidden sizes, vocabulary, batch x sequence) to multiples of 8 (16 for "
            "int8/fp8) so tensor cores can be used for the whole GEMM."
        ),
    ),
    "memory-pressure": RuleText(
        "GPU memory allocator near capacity",
        (
            "Lower peak memory: activation checkpointing (torch.utils.checkpoint), AMP (bf16/fp16 activations), a"
            " smaller micro-batch with gradient accumulation, or set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation."
        ),
    ),
    "data-parallel": RuleText(
        "DataParallel, or DDP without NCCL",
        (
            "Use torch.nn.parallel.DistributedDataParallel (one process per GPU) with the NCCL backend "
            "(init_process_group('nccl')); DataParallel replicates the model every step from one Python thread."
        ),
    ),
    "optimizer": RuleText(
        "Inefficient optimizer step or zero_grad",
        (
            "Use the multi-tensor or fused implementation: torch.optim.<Opt>(..., foreach=True) or fused=True "
            "(one kernel for all parameters instead of one per parameter)."
        ),
    ),
    "cpu-init-copy": RuleText(
        "Tensor initialized on the CPU, then copied with .to()",
        (
            "Create the tensor where it is used: torch.zeros(..., device='cuda', dtype=...) / torch.randn(..., "
            "device=...) instead of torch.zeros(...).to(device); the CPU fill and the host-to-device copy "
            "disappear."
        ),
    ),
    "tiny-ops": RuleText(
        "Many tiny ops per step (Python-level op overhead)",
        (
            "Take the per-op overhead out of the loop: vectorize it (one batched tensor op over all elements or "
            "items instead of one small op each; torch.stack/cat the inputs, index with tensors, not Python "
            "loops), or compile it (torch.compile fuses the small ops and removes their dispatch); on a GPU, "
            "replay the step with CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.graphs)."
        ),
    ),
    "straggler": RuleText(
        "One rank slower than the others",
        (
            "Inspect the straggler host (dyno metrics: CPU, GPU clocks/thermal throttling, PCIe/NIC errors), look"
            " for data skew (longer samples on that rank) or extra work done only there (logging, checkpointing "
            "on rank 0)."
        ),
    ),
}
