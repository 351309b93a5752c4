"""Synthetic traces of one process driving several GPUs, laid out as Kineto writes them.

Kineto's Chrome trace (libkineto ``ChromeTraceLogger::handleActivity``) writes every GPU activity with
``"pid"`` = the device index and ``"tid"`` = the resource id, the CUDA stream; the CUPTI metadata in ``args``
carries ``"device"``, ``"context"``, ``"stream"`` and ``"correlation"``. ``cuda_sync`` rows go on the device of
their context with the stream (``uint32(-1)`` in ``args.stream`` for a device-wide sync, ``-1`` as tid). CUPTI's
stream ids are unique only within a context (``cuptiGetStreamId``: "a context-unique ID"; PyTorch uses one primary
context per device), so they repeat across devices (the shared trace_filter ranks: rank 0 on device 0 and rank 1
on device 1 both use streams 7, 23, 25, 84, 203), and a process that drives cuda:0 and cuda:1 (DataParallel, a
model split across them, pipeline stages in one process) can write two different stream 7s.
Runtime calls stay on the host pid/tid (one host thread, or one per device for DataParallel's replicas).
"""

from __future__ import annotations

from typing import Any

from analysis_trace_builder import PID, TID, TraceBuilder

__all__ = ["MultiGpuTraceBuilder", "PID", "TID"]

SYNC_STREAM = 4294967295  # args.stream of a device-wide cuda_sync (CUPTI's invalid stream id as uint32)


class MultiGpuTraceBuilder(TraceBuilder):
    """``TraceBuilder`` for several devices (``launch(..., device=)``), whose GPU rows carry the CUPTI metadata
    Kineto writes (context, queued, kernel launch parameters); each device has a stream 7 of its own."""

    def __init__(
        self,
        devices: tuple[int, ...] = (0, 1),
        capabilities: dict[int, tuple[int, int]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.devices = devices
        self.capabilities = capabilities or {}  # per device, else the builder's ``capability``

    def _gpu_args(self, cat: str, corr: int, stream: int, device: int) -> dict[str, Any]:
        args: dict[str, Any] = {
            "queued": 0,
            "device": device,
            "context": device + 1,  # one CUDA context per device
            "stream": stream,
            "correlation": corr,
        }
        if cat == "kernel":
            args.update({"registers per thread": 32, "shared memory": 0, "grid": [80, 1, 1], "block": [256, 1, 1]})
        return args

    def busy_on(
        self,
        device: int,
        t0: float,
        n: int,
        k_dur: float = 100.0,
        *,
        stream: int = 7,
        name: str = "compute_kernel",
        gap: float = 0.0,
        launch_lead: float = 50.0,
    ) -> float:
        """n kernels on ``device``/``stream`` from t0, ``gap`` µs apart, each launched ``launch_lead`` µs before it
        starts (the host ahead of the GPU); returns the end of the last."""
        t = t0
        for _ in range(n):
            self.launch(name, t - launch_lead, t, k_dur, stream=stream, device=device)
            t += k_dur + gap
        return t - gap

    def host_bound_on(self, device: int, t0: float, n: int, k_dur: float = 20.0, gap: float = 200.0) -> float:
        """n short kernels on ``device`` each launched only after the previous one ended (the GPU waits for the
        host ``gap`` µs each time: host_wait gaps); returns the end of the last."""
        t = t0
        for _ in range(n):
            self.launch("small_kernel", t - 5.0, t, k_dur, dur=4.0, device=device)
            t += k_dur + gap
        return t - gap

    def nccl_on(self, device: int, ts: float, dur: float, stream: int = 25) -> None:
        nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
        self.launch(nccl, ts - 20.0, ts, dur, stream=stream, device=device)

    def device_sync(self, device: int, ts: float, dur: float) -> None:
        """A cudaDeviceSynchronize on the host and its cuda_sync row on ``device`` (device-wide: no stream)."""
        corr = self.runtime("cudaDeviceSynchronize", ts, dur)
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Device Synchronize",
                "pid": device,
                "tid": -1,
                "ts": ts,
                "dur": dur,
                "args": {"cuda_sync_kind": "Device Synchronize", "stream": SYNC_STREAM, "correlation": corr,
                         "device": device, "context": device + 1},
            }
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        meta: list[dict[str, Any]] = []
        for d in self.devices:
            meta.append({"ph": "M", "name": "process_name", "pid": d, "tid": 0, "args": {"name": "python"}})
            meta.append({"ph": "M", "name": "process_labels", "pid": d, "tid": 0, "args": {"labels": f"GPU {d}"}})
            meta.append({"ph": "M", "name": "thread_name", "pid": d, "tid": 7, "args": {"name": "stream 7 "}})
        doc["traceEvents"] = meta + doc["traceEvents"]
        if self.capability:
            doc["deviceProperties"] = [
                self._device_properties(d, self.capabilities.get(d, self.capability)) for d in self.devices
            ]
        return doc
