"""A CPU training loop with the dyno agent whose trace file is not a trace while a marker file exists: torch's export
is then replaced by a JSON head cut short (the agent accepts it: it starts as a JSON object), as a truncated or
garbage file on disk would be; otherwise torch's own export runs.

Usage: hostile_export_trainer.py --hostile-while FILE [agent_trainer.py's options]
"""

import os
import runpy
import sys
from pathlib import Path

import torch.autograd.profiler as autograd_profiler

marker = sys.argv[sys.argv.index("--hostile-while") + 1]
del sys.argv[sys.argv.index("--hostile-while") : sys.argv.index("--hostile-while") + 2]
_export = autograd_profiler.profile.export_chrome_trace


def export(self, path):  # type: ignore[no-untyped-def]
    if not os.path.exists(marker):
        return _export(self, path)
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "cut sh')


autograd_profiler.profile.export_chrome_trace = export
trainer = str(Path(__file__).with_name("agent_trainer.py"))
sys.argv = [trainer, *sys.argv[1:]]
runpy.run_path(trainer, run_name="__main__")
