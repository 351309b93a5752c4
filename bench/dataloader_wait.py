"""Ground truth for the ``dataloader`` rule: the time a real torch CPU trainer blocks in ``next()`` on its
DataLoader, measured with a clock around each call, next to the rule's share from a torch.profiler trace of the
same run, for several worker counts.

Per configuration it prints: the step time, the measured share of the profiled steps spent in ``next()`` (the
ground truth), the rule's share (union of ``enumerate(DataLoader)#...__next__`` ÷ the steps), whether the rule
flags it, and the hand-off floor: ``next()`` when the batch is surely ready (the trainer sleeps long enough for
the workers to fill the prefetch queue first), i.e. what receiving a batch from a worker costs with no waiting.

    python bench/dataloader_wait.py [--workers 0 2 4] [--steps 30] [--item-ms 0.3] [--step-ms 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from dyno.trace_analysis import analyze


class _Dataset(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``item_ms`` of CPU work per sample (a decode/augment stand-in), then a 3x32x32 image and a label."""

    def __init__(self, n: int, item_ms: float) -> None:
        self.n, self.item_s = n, item_ms / 1000.0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = time.perf_counter()
        while time.perf_counter() - t < self.item_s:
            pass
        return torch.randn(3, 32, 32), torch.tensor(i % 10)


def _busy(ms: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < ms / 1000.0:
        pass


def _trainer(
    workers: int, steps: int, item_ms: float, batch: int
) -> tuple[Iterator[tuple[torch.Tensor, torch.Tensor]], torch.nn.Module, torch.optim.Optimizer]:
    """The seeded trainer both runs share: an iterator over the DataLoader, a small model, its optimizer."""
    torch.manual_seed(0)
    ds = _Dataset(batch * (steps + 10) * 2, item_ms)
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=batch,
        num_workers=workers,
        persistent_workers=workers > 0,
        prefetch_factor=2 if workers else None,
    )
    model = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return iter(loader), model, opt


def _step(
    it: Iterator[tuple[torch.Tensor, torch.Tensor]], model: torch.nn.Module, opt: torch.optim.Optimizer, step_ms: float
) -> tuple[float, float]:
    """One training step; the clock before and after its ``next()``."""
    t0 = time.perf_counter()
    x, y = next(it)
    t1 = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    _busy(step_ms)  # the rest of the model's step
    return t0, t1


def _unprofiled(workers: int, steps: int, item_ms: float, step_ms: float, batch: int) -> float:
    """The same loop without the profiler: the share of the steps spent in next()."""
    it, model, opt = _trainer(workers, steps, item_ms, batch)
    wait = total = 0.0
    for k in range(3 + steps):
        t0, t1 = _step(it, model, opt, step_ms)
        if k >= 3:
            wait += t1 - t0
            total += time.perf_counter() - t0
    return wait / total


def run(workers: int, steps: int, item_ms: float, step_ms: float, batch: int, out: Path) -> dict[str, object]:
    unprofiled = _unprofiled(workers, steps, item_ms, step_ms, batch)
    it, model, opt = _trainer(workers, steps, item_ms, batch)
    waits: list[float] = []
    step_times: list[float] = []
    warm = 3
    path = out / f"w{workers}.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=warm, active=steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for k in range(warm + steps):
            t0, t1 = _step(it, model, opt, step_ms)
            prof.step()
            if k >= warm:
                waits.append(t1 - t0)
                step_times.append(time.perf_counter() - t0)
    # hand-off floor: with the prefetch queue surely full, next() only receives a batch
    floor = []
    for _ in range(5):
        time.sleep(0.3)
        t0 = time.perf_counter()
        next(it)
        floor.append(time.perf_counter() - t0)
    report = analyze(path, rules=["dataloader"], thresholds={"dataloader.max_share": 0.0})
    (f,) = report.findings_of("dataloader") or (None,)
    ruled = f.evidence.share if f is not None else 0.0
    flagged = bool(ruled and ruled > 0.05)
    return {
        "workers": workers,
        "step_ms": 1000 * statistics.mean(step_times),
        "measured_share": sum(waits) / sum(step_times),
        "unprofiled_share": unprofiled,
        "rule_share": ruled,
        "flagged_at_5pct": flagged,
        "next_median_ms": 1000 * statistics.median(waits),
        "handoff_floor_ms": 1000 * statistics.median(floor),
        "handoff_floor_share": statistics.median(floor) / statistics.mean(step_times),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--item-ms", type=float, default=0.3, help="CPU work per sample in __getitem__")
    ap.add_argument("--step-ms", type=float, default=20.0, help="extra CPU work per training step")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each configuration")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for w in args.workers:
                rows.append(run(w, args.steps, args.item_ms, args.step_ms, args.batch, Path(tmp)))
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"{'workers':>7} {'step':>8} {'unprof.':>8} {'measured':>9} {'rule':>7} {'flag@5%':>7} {'next med':>9} "
        f"{'floor':>8} {'floor%':>7}"
    )
    for r in rows:
        print(
            f"{r['workers']:>7} {r['step_ms']:>6.1f}ms {100 * r['unprofiled_share']:>7.1f}% "
            f"{100 * r['measured_share']:>8.1f}% {100 * r['rule_share']:>6.1f}% "
            f"{str(r['flagged_at_5pct']):>7} {r['next_median_ms']:>7.2f}ms {r['handoff_floor_ms']:>6.2f}ms "
            f"{100 * r['handoff_floor_share']:>6.1f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
