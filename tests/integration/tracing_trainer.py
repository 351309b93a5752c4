"""A plain CPU training loop for the tracing tests: nothing dyno-specific in it (libkineto is enabled by env).

--launcher: start one copy of itself as a child worker and wait (a torchrun-like parent that imports torch too).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import torch


def train(step_sleep_s: float) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    print("ready", flush=True)
    while True:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        time.sleep(step_sleep_s)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--launcher", action="store_true")
    p.add_argument("--step-sleep-s", type=float, default=0.02)
    args = p.parse_args()
    if args.launcher:
        child = subprocess.Popen([sys.executable, __file__, "--step-sleep-s", str(args.step_sleep_s)])
        print(f"child {child.pid}", flush=True)
        sys.exit(child.wait())
    train(args.step_sleep_s)


if __name__ == "__main__":
    main()
