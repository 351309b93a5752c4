"""A CPU training loop with the dyno agent whose trace export is slow, as a big trace's is: after torch's export
writes the raw file, it prints "exported" and stalls for --export-stall-s seconds (the export still "running").

Usage: slow_export_trainer.py --stop-file F [--export-stall-s S]
Trains (agent_trainer.py's loop) on the main thread until F exists ("step <n>" every 50 steps), then returns from
the script normally.
"""

import argparse
import runpy
import sys
import time
from pathlib import Path

import torch.autograd.profiler as autograd_profiler

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
# The training loop is agent_trainer's; it starts the agent after the patch above.
trainer = str(Path(__file__).with_name("agent_trainer.py"))
sys.argv = [trainer, "--explicit", "--stop-file", args.stop_file, "--seconds", "3600"]
runpy.run_path(trainer, run_name="__main__")
