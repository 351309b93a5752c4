"""A small CPU DDP training job for the demo, with deliberate problems for dyno to find.

Run under torchrun (gloo backend). Rank `--slow-rank` loads its batches through a slow Dataset with
DataLoader(num_workers=0), so it is late to every all-reduce (a straggler); every rank calls `.item()` on
the loss each step (a host sync) and clears gradients with zero_grad(set_to_none=False). With `--tiny-ops N` every
rank also runs a Python loop of N tiny tensor ops per step (Python-level op overhead: the tiny-ops rule).

    torchrun --nproc-per-node 2 -m dyno.demo_trainer --steps 400
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    p.add_argument("--seconds", type=float, default=0, help="stop after this many seconds (0: no limit)")
    p.add_argument("--slow-rank", type=int, default=1, help="rank with the slow input pipeline (default 1)")
    p.add_argument("--slow-ms", type=float, default=15.0, help="extra ms per sample on the slow rank")
    p.add_argument("--tiny-ops", type=int, default=0, help="tiny tensor ops per step in a Python loop (default 0)")
    args = p.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    class Samples(Dataset):
        def __init__(self, delay_s: float) -> None:
            self.delay_s = delay_s

        def __len__(self) -> int:
            return 1 << 20

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            if self.delay_s:
                time.sleep(self.delay_s)  # a slow decode / remote read
            g = torch.Generator().manual_seed(i)
            x = torch.randn(64, generator=g)
            return x, x.sum(dim=0, keepdim=True)

    delay = args.slow_ms / 1000.0 if rank == args.slow_rank else 0.0
    loader = DataLoader(Samples(delay), batch_size=4, num_workers=0)  # deliberate: no worker processes
    model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)  # deliberate: single-tensor optimizer
    loss_fn = nn.MSELoss()
    start = time.monotonic()
    for step, (x, y) in enumerate(loader):
        if step >= args.steps or (args.seconds and time.monotonic() - start > args.seconds):
            break
        opt.zero_grad(set_to_none=False)  # deliberate: writes zeros instead of dropping the grads
        loss = loss_fn(model(x), y)
        if args.tiny_ops:
            _tiny_op_loop(x, args.tiny_ops)
        loss.backward()
        opt.step()
        if loss.item() != loss.item():  # deliberate: a host sync every step
            print("nan loss", file=sys.stderr)
    dist.barrier()
    # DDP holds the process group: drop it first so destroy_process_group() really stops gloo's threads while the
    # interpreter is alive (one left releasing a work's tensors during shutdown aborts the process, a torch bug)
    del model, opt
    gc.collect()
    dist.destroy_process_group()
    if rank == 0:
        print(f"demo trainer: {step} steps in {time.monotonic() - start:.1f} s (pid {os.getpid()})", flush=True)
    return 0


def _tiny_op_loop(x: torch.Tensor, n: int) -> torch.Tensor:
    """A batch statistic computed one element at a time: n small ops where one vectorized op would do (deliberate)."""
    import torch

    with torch.no_grad():
        acc = x.new_zeros(())
        flat = x.reshape(-1)
        for i in range(n):
            acc.add_(flat[i % flat.numel()])
    return acc


if __name__ == "__main__":
    sys.exit(main())
