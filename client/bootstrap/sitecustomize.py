"""dyno-run's bootstrap: starts the dyno agent in every Python process launched under `dyno-run`.

This directory is put first on PYTHONPATH (with DYNO_AGENT=1) by dyno-run; Python imports `sitecustomize` at
start-up. The agent starts (and registers) only once the process has imported torch: a Python process that never
does (a tool, a helper script, a logging service) gets nothing but a small import hook: not the agent's ~0.2 s of
imports at start-up, nor its thread waking twice a second. Never in multiprocessing helper children (DataLoader
spawn workers and the like) nor in torch's launcher (torchrun, python -m torch.distributed.run), whose workers
register; torch.multiprocessing.spawn workers do register. A `sitecustomize` that this one shadows still runs
afterwards.
"""

import os
import sys

_HELPER_PREFIXES = ("from multiprocessing.", "torch._inductor.compile_worker")


def _start_dyno_agent() -> None:
    if os.environ.get("DYNO_AGENT", "") in ("", "0"):
        return
    argv = getattr(sys, "orig_argv", None) or sys.argv
    # Helpers, not trainers: the multiprocessing forkserver and resource tracker, inductor compile workers. A
    # multiprocessing spawn child ("--multiprocessing-fork") may be either (a torch.multiprocessing.spawn worker or
    # a DataLoader worker): the agent tells them apart once the child runs its target (dyno.client.agent.env).
    if "--multiprocessing-fork" not in argv and any(a.startswith(_HELPER_PREFIXES) for a in argv):
        return
    try:
        from dyno.import_watch import after_import
        from dyno.python_argv import torch_launcher  # both cheap, standard library only

        # torch's launcher (torchrun, python -m torch.distributed.run) imports torch but trains nothing: only its
        # workers, which run this bootstrap too, are trainers.
        if torch_launcher(argv) is None:
            after_import("torch", _on_torch_imported)  # right after `import torch`, on the thread importing it
    except Exception as e:  # never keep the program from starting
        sys.stderr.write(f"dyno agent: not started: {type(e).__name__}: {e}\n")


def _on_torch_imported(_torch: object) -> None:
    # grpc's fork handlers off unless asked for (they must be chosen before grpc is imported): the agent's Watch
    # call is always in flight, so each fork() (DataLoader workers) would log "skipping fork() handlers".
    added = "GRPC_ENABLE_FORK_SUPPORT" not in os.environ
    if added:
        os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
    try:
        from dyno.client import agent

        agent.start(wait_for_torch=True)
    except Exception as e:  # never break the program's import of torch
        sys.stderr.write(f"dyno agent: not started: {type(e).__name__}: {e}\n")
    finally:
        if added:
            os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # the program's children see the environment as given


def _chain_shadowed_sitecustomize() -> None:
    # We shadow any other sitecustomize on the path (e.g. a distribution's): load the next one too.
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_dyno_shadowed_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                try:
                    spec.loader.exec_module(importlib.util.module_from_spec(spec))
                except Exception as e:
                    sys.stderr.write(f"dyno agent: error in {candidate}: {type(e).__name__}: {e}\n")
            return


_start_dyno_agent()
_chain_shadowed_sitecustomize()
