"""A process registered by dyno's agent, without torch: for tests whose subject is what the daemon makes of
registered processes (job accounting, its exports), not tracing. torch's import is most of a trainer's start.

Usage: registered_idler.py [--seconds S] [--step-sleep S]
  a light CPU loop, --step-sleep between rounds, until --seconds pass or it is killed
"""

import argparse
import time

from dyno.client import agent

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=300.0)
p.add_argument("--step-sleep", type=float, default=0.01)
args = p.parse_args()

agent.start()
deadline = time.monotonic() + args.seconds
while time.monotonic() < deadline:
    sum(i * i for i in range(2000))
    time.sleep(args.step_sleep)
