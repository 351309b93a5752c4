"""A CPU training loop with the dyno agent whose trace export is slow, as a big trace's is: after torch's export
writes the raw file, it prints "exported" and stalls for --export-stall-s seconds (the export still "running").

Usage: slow_export_trainer.py --stop-file F [--export-stall-s S]
Trains on the main thread until F exists ("step <n>" every 50 steps), then returns from the script normally.
"""

import argparse
import os
import time

import torch
import torch.autograd.profiler as autograd_profiler

from dyno.client import agent

p = argparse.ArgumentParser()
p.add_argument("--stop-file", required=True)
p.add_argument("--export-stall-s", type=float, default=30.0)
args = p.parse_args()

_export = autograd_profiler.profile.export_chrome_trace


def slow_export(self, path):  # type: ignore[no-untyped-def]
    _export(self, path)
    print("exported", flush=True)
    time.sleep(args.export_stall_s)


autograd_profiler.profile.export_chrome_trace = slow_export
agent.start()

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randn(16, 8)
step = 0
while not os.path.exists(args.stop_file):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 50 == 0:
        print(f"step {step}", flush=True)
    time.sleep(0.002)
print(f"finished {step}", flush=True)
