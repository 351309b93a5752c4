"""A CPU training loop that stops stepping its optimizer: it steps --steps times (0: never), prints "stopped <n>",
then idles (an evaluation, a checkpoint, a hang) until --stop-file exists (it then steps again, --after-steps times)
or --idle-s pass, and exits.

Usage: stalling_trainer.py [--agent] [--no-step-s S] [--steps N] [--idle-s S] [--stop-file F] [--after-steps N]
  --agent        start dyno's agent (dyno.client.agent.start()); its no-step bound NO_STEP_S set to --no-step-s
                 (dyno.client.agent.steps; the default 30 s) and STARTUP_S left at 300 s, so an iteration trace
                 of it waits (a young process may still be starting up) instead of failing early
"""

import argparse
import os
import time

p = argparse.ArgumentParser()
p.add_argument("--agent", action="store_true")
p.add_argument("--no-step-s", type=float, default=30.0)
p.add_argument("--steps", type=int, default=25)
p.add_argument("--idle-s", type=float, default=120.0)
p.add_argument("--stop-file", default="")
p.add_argument("--after-steps", type=int, default=0)
args = p.parse_args()

if args.agent:
    import dyno.client.agent.steps as agent_steps

    agent_steps.NO_STEP_S = args.no_step_s
    from dyno.client import agent

    agent.start()

import torch  # noqa: E402  (after the agent: it hooks torch's import)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randn(16, 8)


def train(steps: int) -> None:
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.002)


train(args.steps)
print(f"stopped {args.steps}", flush=True)
deadline = time.monotonic() + args.idle_s
while time.monotonic() < deadline and not (args.stop_file and os.path.exists(args.stop_file)):
    time.sleep(0.05)
train(args.after_steps)
print("finished", flush=True)
