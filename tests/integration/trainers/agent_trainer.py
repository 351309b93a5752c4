"""A tiny CPU training loop for the agent tests.

Usage: agent_trainer.py [--explicit] [--steps N | --seconds S] [--ready-file F] [--stop-file F] [--dist]
  --explicit     call dyno.client.agent.start() itself (otherwise it relies on dyno-run's bootstrap, if any)
  --steps N      run N optimizer steps (default: until --stop-file exists or --seconds pass)
  --dist         join a gloo process group (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment) and
                 train with DistributedDataParallel: ranks step in lockstep (and stop at the same step) and
                 traces carry distributedInfo
Prints "step <n>" every 50 steps and "finished <n>" at the end.
"""

import argparse
import gc
import os
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--explicit", action="store_true")
p.add_argument("--steps", type=int, default=0)
p.add_argument("--seconds", type=float, default=120.0)
p.add_argument("--stop-file", default="")
p.add_argument("--step-sleep", type=float, default=0.002)
p.add_argument("--dist", action="store_true")
args = p.parse_args()

if args.explicit:
    from dyno.client import agent

    agent.start()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
if args.dist:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randn(16, 8)
deadline = time.monotonic() + args.seconds
step = 0


def should_stop() -> bool:
    if args.steps:
        return step >= args.steps
    stop = time.monotonic() > deadline or bool(args.stop_file and os.path.exists(args.stop_file))
    if args.dist:  # every rank stops at the same step: one that stopped alone left the others in an allreduce
        flag = torch.tensor([int(stop)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = bool(flag.item())
    return stop


while not should_stop():
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 50 == 0:
        print(f"step {step}", flush=True)
    time.sleep(args.step_sleep)
print(f"finished {step}", flush=True)
if args.dist:
    # Leave the group while the interpreter is fully alive. DDP holds the process group: without dropping it
    # first, destroy_process_group() leaves gloo's worker threads running, and one that releases a finished
    # work's tensors during interpreter shutdown aborts the process (SIGABRT, "terminate called without an
    # active exception"; PyTorch's gloo teardown, not dyno's or libkineto's).
    del model, opt
    gc.collect()
    dist.destroy_process_group()
