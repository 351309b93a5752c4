"""The agent's torch profiler: torch.autograd.profiler.profile driven by hand (start and stop on any thread), with
the process's one-profiler-session rule enforced, distributedInfo recorded, FLOP counts read back, and an inherited
session stopped in forked children. It uses the torch the program loaded, never imports torch itself."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from dyno.client.agent.flops import flop_counts
from dyno.client.agent.spec import AgentTraceSpec, TraceFailed
from dyno.trace_options import profiler_flags

__all__ = ["Profiler", "profiler_factory"]

log = logging.getLogger(__name__)


_running_profilers: set[int] = set()  # ids of our Profilers between start and stop
_profiler_starts = 0  # torch profiler starts in this process, ours and the program's (_count_profiler_starts)


def _count_profiler_starts(torch: Any) -> bool:
    """Count every torch profiler start in this process from now on: torch's profilers (torch.profiler.profile,
    autograd.profiler.profile, emit_nvtx...) all call torch.autograd.profiler._run_on_profiler_start, looked up at
    call time, which is wrapped here once. A profiler the program starts during one of our traces takes torch's one
    profiler session over, and the flag torch keeps (_is_profiler_enabled) cannot tell that apart from ours while the
    program's still runs: stopping "ours" then ended the program's session (its own export crashed the trainer,
    SIGSEGV) or returned an empty result whose export crashed it. False when this torch has no such function."""
    module = torch.autograd.profiler
    original = getattr(module, "_run_on_profiler_start", None)
    if not callable(original):
        return False
    if getattr(original, "_dyno_counts_starts", False):
        return True

    def counting(*args: Any, **kwargs: Any) -> Any:
        global _profiler_starts
        _profiler_starts += 1
        return original(*args, **kwargs)

    counting._dyno_counts_starts = True  # type: ignore[attr-defined]
    module._run_on_profiler_start = counting
    return True


def _stop_inherited_profiler() -> None:
    """After fork(), in the child: a child forked while one of our traces runs (a DataLoader worker) inherits the
    profiler session, still recording, and nothing would ever stop it: every op it runs stays buffered (hundreds
    of MB in a busy worker). Stop it there; the parent's trace is not affected."""
    if not _running_profilers:
        return
    _running_profilers.clear()
    torch = sys.modules.get("torch")
    try:
        torch._C._autograd._disable_profiler()  # type: ignore[union-attr]
    except Exception:  # never break the child over this
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_stop_inherited_profiler)


class Profiler:
    """torch.autograd.profiler.profile driven by hand. Not torch.profiler.profile: its start() evaluates
    `hasattr(torch, "_inductor")`, a lazy import of inductor that, run on the agent thread while the trainer is
    still importing torch._dynamo (its first optimizer), broke the trainer's import in our tests."""

    def __init__(self, torch: Any, spec: AgentTraceSpec, all_threads: bool) -> None:
        self._torch = torch
        kwargs: dict[str, Any] = dict(
            use_cpu=True,
            use_kineto=True,
            **profiler_flags(spec),
            custom_trace_id_callback=lambda: spec.trace_id,
        )
        try:
            if torch.cuda.is_available():
                kwargs["use_device"] = "cuda"
        except Exception:
            pass
        if all_threads:
            try:
                kwargs["experimental_config"] = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
            except (AttributeError, TypeError):
                log.warning("dyno agent: this torch cannot profile all threads; a duration trace may miss the trainer")
        self._kwargs = kwargs
        self._prof: Any = None
        self._counting = False
        self._starts_at_start = 0

    def start(self) -> None:
        # One profiler per process: starting ours inside the program's own (torch.profiler.profile) took its
        # session over, and its results came out empty ("disableProfiler called but no active profiling session").
        if getattr(self._torch.autograd.profiler, "_is_profiler_enabled", False):
            raise TraceFailed(
                "the program is running its own torch profiler (torch.profiler.profile or autograd.profiler); "
                "two cannot run at once: trace again when it has stopped"
            )
        try:
            self._counting = _count_profiler_starts(self._torch)
        except Exception:  # never fail a trace over this: without it, a takeover is seen only once it has ended
            log.debug("dyno agent: cannot count profiler starts", exc_info=True)
        self._prof = self._torch.autograd.profiler.profile(**self._kwargs)
        before = _profiler_starts
        self._prof.__enter__()
        # Ours is counted once, at the start of __enter__ (before kineto is enabled, which takes a while): a start
        # counted beyond it meanwhile is the program's (on the training thread, while this one is the agent's).
        self._starts_at_start = before + min(1, _profiler_starts - before)
        _running_profilers.add(id(self))
        self._add_distributed_info()

    def stop(self) -> None:
        # torch keeps one profiler session per process: a profiler the program started during ours took it over.
        # Stopped since (torch's "enabled" flag is clear) or still running (another start was counted), the session
        # is not ours to stop: disabling it ended the program's (whose export then crashed the trainer, SIGSEGV), or
        # returned an empty result whose export crashed it, and logged "disableProfiler called but no active
        # profiling session found" on the trainer's stderr. Nothing of ours is left to stop or export.
        taken_over = not getattr(self._torch.autograd.profiler, "_is_profiler_enabled", True) or (
            self._counting and _profiler_starts != self._starts_at_start
        )
        _running_profilers.discard(id(self))
        if taken_over:
            raise TraceFailed("the program started its own torch profiler during the trace, which ended ours")
        self._prof.__exit__(None, None, None)

    def export_chrome_trace(self, path: str) -> None:
        self._prof.export_chrome_trace(path)

    def flop_counts(self) -> dict[int, int]:
        """{event index: FLOP estimate} of the recorded ops (with_flops), which the export leaves out."""
        return flop_counts(self._prof.kineto_results)

    def _add_distributed_info(self) -> None:
        # What torch.profiler.profile records too: multi-rank analysis reads the rank from it.
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return
            info = {"backend": str(dist.get_backend()), "rank": dist.get_rank(), "world_size": dist.get_world_size()}
            self._torch.autograd._add_metadata_json("distributedInfo", json.dumps(info))
        except Exception:
            log.debug("dyno agent: no distributedInfo", exc_info=True)


def profiler_factory(spec: AgentTraceSpec, all_threads: bool) -> Callable[[], Any]:
    loaded = sys.modules.get("torch")
    if loaded is None or getattr(loaded.__spec__, "_initializing", False) or not hasattr(loaded, "autograd"):
        raise TraceFailed("torch is not loaded in this process")
    if spec.with_stack and "torch.profiler.python_tracer" not in sys.modules:
        import torch.profiler.python_tracer  # noqa: F401 - a leaf module the profiler's stop would import
    return lambda: Profiler(loaded, spec, all_threads)
