"""A synthetic Kineto-shaped trace of any size, for the analysis benchmarks (bench/analysis_vs_hta.py): one rank on
one GPU, ProfilerStep# windows every 5,000 ops, each op a cpu_op, its cudaLaunchKernel, a kernel or a device copy,
and the flow events that join them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_synthetic_trace"]


def write_synthetic_trace(path: Path, n_events: int) -> int:
    """Write a Kineto-shaped trace of about ``n_events`` events (cpu_op, runtime, kernel, flows); return its size."""
    import orjson  # here, not at the top: the benchmark's measured workers import this module's importer

    units = n_events // 5
    pid, tid = 4242, 4242
    with open(path, "wb") as fh:
        fh.write(b'{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},\n')
        fh.write(
            b'"deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000, '
            b'"computeMajor": 9, "computeMinor": 0, "numSms": 132}],\n"traceEvents": [\n'
        )
        ts = 1_700_000_000_000_000.0
        gpu_t = ts
        first = True
        step_every = 5000
        for start in range(0, units, 10_000):
            batch = []
            for u in range(start, min(units, start + 10_000)):
                if u % step_every == 0:
                    batch.append(
                        {
                            "ph": "X",
                            "cat": "user_annotation",
                            "name": f"ProfilerStep#{u // step_every}",
                            "pid": pid,
                            "tid": tid,
                            "ts": ts,
                            "dur": step_every * 20.0,
                            "args": {"External id": u, "Ev Idx": u},
                        }
                    )
                corr = 1_000_000 + u
                name = ("aten::mm", "aten::add", "aten::relu", "aten::copy_")[u % 4]
                kname = (
                    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>(Params)",
                    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
                    "void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel>()",
                    "Memcpy DtoD (Device -> Device)",
                )[u % 4]
                kcat = "gpu_memcpy" if u % 4 == 3 else "kernel"
                batch.append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": name,
                        "pid": pid,
                        "tid": tid,
                        "ts": ts,
                        "dur": 15.5,
                        "args": {"External id": u, "Ev Idx": u, "Sequence number": u, "Fwd thread id": 0},
                    }
                )
                batch.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": pid,
                        "tid": tid,
                        "ts": ts + 5.0,
                        "dur": 6.25,
                        "args": {"External id": u, "cbid": 211, "correlation": corr},
                    }
                )
                batch.append(
                    {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": ts + 5.0, "cat": "ac2g", "name": "ac2g"}
                )
                gpu_t = max(gpu_t, ts + 12.0)
                kdur = (9.0, 3.5, 2.25, 4.0)[u % 4]
                kargs: dict[str, Any] = {"External id": u, "device": 0, "context": 1, "stream": 7, "correlation": corr}
                if kcat == "kernel":
                    kargs.update(
                        {
                            "queued": 0,
                            "registers per thread": 128,
                            "shared memory": 49152,
                            "blocks per SM": 1.5,
                            "warps per SM": 12.0,
                            "grid": [264, 1, 1],
                            "block": [256, 1, 1],
                            "est. achieved occupancy %": 19,
                        }
                    )
                else:
                    kargs.update({"bytes": 1 << 20, "memory bandwidth (GB/s)": 250.0})
                batch.append(
                    {"ph": "X", "cat": kcat, "name": kname, "pid": 0, "tid": 7, "ts": gpu_t, "dur": kdur, "args": kargs}
                )
                batch.append(
                    {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": gpu_t, "cat": "ac2g", "name": "ac2g", "bp": "e"}
                )
                gpu_t += kdur + 0.5
                ts += 20.0
            for e in batch:
                if not first:
                    fh.write(b",\n")
                fh.write(orjson.dumps(e))
                first = False
        fh.write(b'\n],\n"traceName": "synthetic.json", "displayTimeUnit": "ms"}\n')
    return path.stat().st_size
