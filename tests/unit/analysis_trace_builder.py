"""Tiny Chrome-trace (PyTorch profiler / Kineto layout) builder for rule tests, plus real CPU torch traces.

``TraceBuilder`` emits the same event shapes Kineto writes (cpu_op / cuda_runtime / kernel / gpu_memcpy with
correlation ids, ProfilerStep annotations, ``[memory]`` instants, deviceProperties, distributedInfo).
``torch_cpu_traces(tmpdir)`` runs small real ``torch.profiler`` sessions that exhibit CPU-visible antipatterns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PID, TID, DEV = 100, 101, 0


class TraceBuilder:
    def __init__(
        self,
        rank: int = 0,
        capability: tuple[int, int] | None = (8, 0),
        total_mem: int = 40 * 2**30,
        record_shapes: bool = False,
        world_size: int = 1,
        backend: str = "nccl",
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.rank = rank
        self.capability = capability
        self.total_mem = total_mem
        self.record_shapes = record_shapes
        self.world_size = world_size
        self.backend = backend
        self._corr = 1000

    def cpu(self, name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = TID, **args: Any) -> None:
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": dict(args)}
        )

    def step(self, n: int, ts: float, dur: float) -> None:
        self.cpu(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def runtime(self, name: str, ts: float, dur: float, corr: int | None = None, tid: int = TID) -> int:
        corr = self._next() if corr is None else corr
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": PID,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": corr, "cbid": 211},
            }
        )
        return corr

    def gpu(
        self,
        cat: str,
        name: str,
        ts: float,
        dur: float,
        corr: int,
        stream: int = 7,
        nbytes: int = 0,
        device: int = DEV,
    ) -> None:
        """A GPU activity row on ``device``/``stream`` (Kineto: ``"pid"`` = the device, ``"tid"`` = the stream)."""
        args = self._gpu_args(cat, corr, stream, device)
        if nbytes:
            args["bytes"] = nbytes
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": args}
        )

    def _gpu_args(self, cat: str, corr: int, stream: int, device: int) -> dict[str, Any]:
        """The CUPTI metadata of a GPU row's ``args`` (a subclass writes more of it)."""
        return {"correlation": corr, "stream": stream, "device": device}

    def launch(
        self,
        kernel: str,
        ts: float,
        k_ts: float,
        k_dur: float,
        dur: float = 5.0,
        stream: int = 7,
        call: str = "cudaLaunchKernel",
        device: int = DEV,
        tid: int = TID,
    ) -> int:
        """A launch call on host thread ``tid`` at ts (dur µs) whose kernel runs on ``device``/``stream`` at k_ts
        for k_dur µs; returns their correlation id."""
        corr = self.runtime(call, ts, dur, tid=tid)
        self.gpu("kernel", kernel, k_ts, k_dur, corr, stream, device=device)
        return corr

    def memcpy(
        self,
        name: str,
        ts: float,
        k_ts: float,
        k_dur: float,
        nbytes: int,
        call: str = "cudaMemcpyAsync",
        dur: float = 5.0,
    ) -> None:
        corr = self.runtime(call, ts, dur)
        self.gpu("gpu_memcpy", name, k_ts, k_dur, corr, stream=7, nbytes=nbytes)

    def memory(self, ts: float, total_allocated: int, device: int = DEV) -> None:
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "name": "[memory]",
                "pid": PID,
                "tid": TID,
                "ts": ts,
                "args": {
                    "Device Type": 1,
                    "Device Id": device,
                    "Bytes": 1024,
                    "Total Allocated": total_allocated,
                    "Total Reserved": total_allocated,
                },
            }
        )

    def busy_gpu(self, t0: float, n: int, k_dur: float = 100.0, stream: int = 7, name: str = "compute_kernel") -> float:
        """n back-to-back kernels launched well ahead (a GPU-bound stretch); returns the end time."""
        t = t0
        for i in range(n):
            self.launch(name, t0 + i * 6.0, t, k_dur, stream=stream)
            t += k_dur
        return t

    def _next(self) -> int:
        self._corr += 1
        return self._corr

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schemaVersion": 1,
            "distributedInfo": {"rank": self.rank, "world_size": self.world_size, "backend": self.backend},
            "traceEvents": [
                {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
                *self.events,
            ],
        }
        if self.capability:
            doc["deviceProperties"] = [self._device_properties(DEV, self.capability)]
        if self.record_shapes:
            doc["record_shapes"] = 1
        return doc

    def _device_properties(self, device: int, capability: tuple[int, int]) -> dict[str, Any]:
        """One ``deviceProperties`` entry, as Kineto writes it for a device."""
        return {
            "id": device,
            "name": "Fake GPU",
            "totalGlobalMem": self.total_mem,
            "computeMajor": capability[0],
            "computeMinor": capability[1],
        }

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json()))
        return path


def torch_cpu_traces(out: Path) -> dict[str, Path]:
    """Real torch.profiler CPU traces (a few ms each): 'bad' shows the CPU-visible antipatterns
    (DataLoader num_workers=0 with a slow dataset, .item() every step, single-tensor SGD, zero_grad writing
    zeros, a CPU tensor filled then copied with .to()); 'good' avoids them."""
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    class SlowDataset(torch.utils.data.Dataset):
        def __init__(self, delay: float) -> None:
            self.delay = delay

        def __len__(self) -> int:
            return 32

        def __getitem__(self, i: int):  # noqa: ANN204
            if self.delay:
                time.sleep(self.delay)
            return torch.randn(16), torch.randn(4)

    def run(path: Path, bad: bool) -> Path:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=not bad)
        loader = torch.utils.data.DataLoader(SlowDataset(0.002 if bad else 0.0), batch_size=4, num_workers=0)
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=5, repeat=1),
        ) as prof:
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad(set_to_none=not bad)
                loss.backward()
                opt.step()
                if bad:
                    loss.item()
                    t = torch.zeros(8, 8)
                    t.fill_(1.0)
                    t.to(torch.float64)
                prof.step()
        prof.export_chrome_trace(str(path))
        return path

    out.mkdir(parents=True, exist_ok=True)
    return {"bad": run(out / "bad.pt.trace.json", True), "good": run(out / "good.pt.trace.json", False)}
