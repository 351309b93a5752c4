"""A torch.multiprocessing.spawn trainer (the DDP launch pattern without torchrun) for the agent tests.

Usage: spawn_trainer.py --seconds S
The parent only spawns one worker and waits. The worker trains with a DataLoader that has one spawn-started worker
of its own (a helper, not a trainer) and prints "worker <pid> loader <pid>" once both run, then "step <n>" every 50
optimizer steps.
"""

import argparse
import os
import time

import torch
import torch.multiprocessing as mp


class Data(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> tuple:
        return torch.randn(32), torch.randn(8), os.getpid()


def train(rank: int, seconds: float) -> None:
    model = torch.nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(), batch_size=16, num_workers=1, multiprocessing_context="spawn")
    deadline = time.monotonic() + seconds
    for step, (x, y, loader_pids) in enumerate(loader, 1):
        if step == 1:
            print(f"worker {os.getpid()} loader {int(loader_pids[0])}", flush=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}", flush=True)
        if time.monotonic() > deadline:
            break
        time.sleep(0.002)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=120.0)
    mp.spawn(train, args=(p.parse_args().seconds,), nprocs=1)
