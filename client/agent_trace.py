"""Running one torch.profiler trace for the agent, and writing its file.

Duration traces run on the agent's worker thread (`profile_all_threads=True`, without which a profiler started
off the training thread records nothing of it). Iteration traces start and stop inside the global optimizer step
post-hook, i.e. on the training thread, so they capture exactly N steps. torch is imported lazily: this module is
importable (and `write_trace_file` usable) without it.
"""

from __future__ import annotations

import gzip
import importlib.abc
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dyno.client.agent_flops import FlopArgs, flop_counts, flops_note
from dyno.client.agent_output import OutputFiles, TraceAbandoned, unlink_quietly
from dyno.diskspace import free_space_note

__all__ = [
    "TraceSpec",
    "TraceResult",
    "TraceFailed",
    "StepCounter",
    "exited_early_note",
    "run_trace",
    "write_trace_file",
]

log = logging.getLogger(__name__)

_OPTIMIZER_MODULE = "torch.optim.optimizer"
_DEFAULT_ITERATION_DEADLINE_S = 600.0  # when the daemon sets none: never wait forever for optimizer steps
_WIND_DOWN_S = 5.0  # how long a new trace waits for an abandoned iteration trace's profiler to stop
_HEAD_BYTES = 64 * 1024  # kineto writes its metadata (incl. "trace_id") in the first few hundred bytes
_TRACE_ID_KEY = re.compile(rb'"trace_id"\s*:\s*"(?:[^"\\]|\\.)*"')


@dataclass(frozen=True)
class TraceSpec:
    """One trace request as the agent runs it (converted from the proto TraceConfig)."""

    trace_id: str
    output_path: Path
    duration_ms: int | None = None
    iterations: int | None = None
    start_time_ms: int | None = None  # absolute unix ms
    start_iteration_roundup: int | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    deadline_ms: int = 0  # unix ms; 0: none given


@dataclass(frozen=True)
class TraceResult:
    path: Path
    size_bytes: int
    note: str = ""  # reported with DONE, e.g. why the trace is shorter than asked


def exited_early_note(recorded: str, requested: str) -> str:
    """The note of a trace cut short because the program exited normally during it ("2.1 s", "10 s")."""
    return (
        f"ended early: the program exited after {recorded} of the requested {requested}; "
        "the file holds what was recorded until then"
    )


class TraceFailed(Exception):
    """The trace could not be taken or written; str() is the reason reported to the daemon."""


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- writing ---------------------------------------------------------------------------------------------------


def _with_trace_id(head: bytes, trace_id: str) -> bytes:
    """The JSON head with its top-level "trace_id" set to trace_id (replaced if kineto wrote one, else inserted
    after the opening brace)."""
    value = b'"trace_id": "' + trace_id.encode().replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    events_at = head.find(b'"traceEvents"')
    header = head if events_at < 0 else head[:events_at]
    match = _TRACE_ID_KEY.search(header)
    if match:
        return head[: match.start()] + value + head[match.end() :]
    brace = head.find(b"{")
    if brace < 0:
        raise TraceFailed("profiler export is not a JSON object")
    rest = head[brace + 1 :]
    sep = b"" if rest.lstrip().startswith(b"}") else b", "
    return head[: brace + 1] + value + sep + rest


def write_trace_file(
    raw_json: Path,
    output: Path,
    trace_id: str,
    files: OutputFiles | None = None,
    line_filter: Callable[[bytes], bytes] | None = None,
) -> int:
    """Copy the profiler's JSON export to `output` with trace_id embedded, gzip-compressed when `output` ends in
    .gz, atomically (`<output>.tmp`, then rename), streaming. Returns the final size in bytes. With `files`, nothing
    is created or renamed once they were abandoned (TraceFailed). `line_filter` rewrites the export line by line
    (e.g. agent_flops.FlopArgs); without it the bytes are copied as they are."""
    files = files or OutputFiles(output)
    tmp = files.tmp
    try:
        with open(raw_json, "rb") as src:
            head = src.read(_HEAD_BYTES)
            if line_filter is not None:
                head += src.readline()  # whole lines only, for the filter
            head = _with_trace_id(head, trace_id)
            opener = gzip.open if output.name.endswith(".gz") else open
            with files.creating():
                dst = opener(tmp, "wb")
            with dst:
                if line_filter is None:
                    dst.write(head)
                    shutil.copyfileobj(src, dst, 1024 * 1024)
                else:
                    dst.write(line_filter(head))
                    dst.writelines(line_filter(line) for line in src)
        with files.creating():
            os.replace(tmp, output)
    except TraceAbandoned as e:
        raise TraceFailed(str(e)) from e
    except OSError as e:
        unlink_quietly(tmp)
        raise TraceFailed(f"cannot write {output}: {e.strerror or e}") from e
    return output.stat().st_size


def _check_output_dir(output: Path) -> None:
    # Fail before profiling: a trace that cannot be written is not worth slowing the trainer for.
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceFailed(f"output directory {output.parent} cannot be created: {e.strerror or e}") from e
    if not os.access(output.parent, os.W_OK | os.X_OK):
        raise TraceFailed(f"output directory {output.parent} is not writable by uid {os.geteuid()}")


# --- the optimizer step hook --------------------------------------------------------------------------------------


class _IterationPlan:
    """An iteration trace in progress; driven by StepCounter on the training thread."""

    def __init__(self, spec: TraceSpec, make_profiler: Callable[[], Any]) -> None:
        self.spec = spec
        self.make_profiler = make_profiler
        self.roundup = max(1, spec.start_iteration_roundup or 1)
        self.started = threading.Event()
        self.finished = threading.Event()
        self.cancelled = False
        self.completed = False
        self.profiler: Any = None
        self.first_step = 0
        self.stop_step = 0
        self.steps_seen = 0
        self.error: str | None = None
        self.thread = 0  # ident of the thread that started the profiler (the training thread)
        self.ended_early = False  # stopped by finish_early: the program exited

    def on_step(self, step: int) -> bool:
        """Called after optimizer step number `step`; True when the plan is over."""
        if self.cancelled:
            if self.profiler is not None:
                self.profiler.stop()  # stop what we started; the result is discarded
            return True
        if self.profiler is None:
            if self.spec.start_time_ms and _now_ms() < self.spec.start_time_ms:
                return False
            if step % self.roundup:
                return False
            self.profiler = self.make_profiler()
            self.profiler.start()
            self.thread = threading.get_ident()
            self.first_step, self.stop_step = step, step + (self.spec.iterations or 1)
            self.started.set()
            return False
        self.steps_seen = step - self.first_step
        if step >= self.stop_step:
            self.profiler.stop()
            self.completed = True
            return True
        return False


class StepCounter:
    """Counts optimizer steps process-wide through torch's global optimizer step post-hook and runs the current
    iteration plan. The hook is registered on the thread that imports torch.optim (or that calls install), never
    from the agent thread: the optimizer iterates the global hook dict while stepping."""

    def __init__(self) -> None:
        self.steps = 0
        self._plan: _IterationPlan | None = None
        self._installed = False
        self._lock = threading.Lock()
        self._plan_lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> None:
        """Register the hook now if torch.optim is loaded, else as soon as it finishes loading."""
        module = sys.modules.get(_OPTIMIZER_MODULE)
        if module is not None and hasattr(module, "register_optimizer_step_post_hook"):
            self._register(module)
        elif not any(isinstance(f, _ImportWatcher) for f in sys.meta_path):
            sys.meta_path.insert(0, _ImportWatcher(_OPTIMIZER_MODULE, self._register))

    def _register(self, module: Any) -> None:
        with self._lock:
            if self._installed:
                return
            module.register_optimizer_step_post_hook(self._hook)
            self._installed = True
        log.debug("dyno agent: optimizer step hook installed")

    def _hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # The training thread's hot path: one increment and one attribute read when no trace is running.
        self.steps += 1
        if self._plan is None:
            return
        with self._plan_lock:  # against abandon() from the agent thread
            plan = self._plan
            if plan is None:
                return
            try:
                done = plan.on_step(self.steps)
            except TraceFailed as e:
                plan.error, done = str(e), True
            except Exception as e:  # never let tracing break a training step
                plan.error = f"profiler failed on the training thread: {type(e).__name__}: {e}"
                done = True
            if done:
                self._plan = None
                plan.finished.set()

    def set_plan(self, plan: _IterationPlan) -> None:
        self._plan = plan

    def abandon(self, plan: _IterationPlan) -> None:
        """Give up on plan (cancelled or past its deadline). Never started: dropped now. Started: the training
        thread stops its profiler at the next step."""
        with self._plan_lock:
            plan.cancelled = True
            if plan.profiler is None and self._plan is plan:
                self._plan = None
                plan.finished.set()

    def finish_early(self) -> bool:
        """At a normal exit, on the thread running the atexit handlers: when that thread started the current
        plan's profiler (it trained on the main thread, and steps no more), stop the profiler here and end the
        plan as completed early, its recorded steps to be written. True when it did. Another thread's profiler
        cannot be stopped from here (torch's session is that thread's): False, and the plan is left alone."""
        with self._plan_lock:
            plan = self._plan
            if plan is None or plan.profiler is None or plan.cancelled or plan.thread != threading.get_ident():
                return False
            plan.steps_seen = self.steps - plan.first_step
            try:
                plan.profiler.stop()
                plan.completed = True
            except TraceFailed as e:
                plan.error = str(e)
            except Exception as e:
                plan.error = f"profiler failed to stop at exit: {type(e).__name__}: {e}"
            plan.ended_early = True
            self._plan = None
            plan.finished.set()
            return True

    def wait_idle(self, cancel: threading.Event, timeout_s: float = _WIND_DOWN_S) -> None:
        """Wait for an abandoned plan whose profiler runs to be stopped by the training thread: two profilers
        cannot run at once."""
        plan, until = self._plan, time.monotonic() + timeout_s
        while plan is not None and not cancel.is_set() and time.monotonic() < until:
            plan.finished.wait(0.05)
            plan = self._plan
        if plan is not None:
            raise TraceFailed(
                "cancelled"
                if cancel.is_set()
                else "a previous trace's profiler is still running: the trainer has "
                "not stepped its optimizer since it was cancelled"
            )


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `callback(module)` right after module `name` is executed, on the importing thread; then removes
    itself."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        callback = self.callback

        def exec_module(module: Any) -> None:
            original(module)
            try:
                callback(module)
            except Exception:
                log.debug("dyno agent: optimizer hook installation failed", exc_info=True)

        loader.exec_module = exec_module
        return spec


# --- running ------------------------------------------------------------------------------------------------------


_running_profilers: set[int] = set()  # ids of our _Profilers between start and stop


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


class _Profiler:
    """torch.autograd.profiler.profile driven by hand. Not torch.profiler.profile: its start() evaluates
    `hasattr(torch, "_inductor")`, a lazy import of inductor that, run on the agent thread while the trainer is
    still importing torch._dynamo (its first optimizer), broke the trainer's import in our tests."""

    def __init__(self, torch: Any, spec: TraceSpec, all_threads: bool) -> None:
        self._torch = torch
        kwargs: dict[str, Any] = dict(
            use_cpu=True,
            use_kineto=True,
            record_shapes=spec.record_shapes,
            profile_memory=spec.profile_memory,
            with_stack=spec.with_stack,
            with_flops=spec.with_flops,
            with_modules=spec.with_modules,
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

    def start(self) -> None:
        # One profiler per process: starting ours inside the program's own (torch.profiler.profile) took its
        # session over, and its results came out empty ("disableProfiler called but no active profiling session").
        if getattr(self._torch.autograd.profiler, "_is_profiler_enabled", False):
            raise TraceFailed(
                "the program is running its own torch profiler (torch.profiler.profile or autograd.profiler); "
                "two cannot run at once: trace again when it has stopped"
            )
        self._prof = self._torch.autograd.profiler.profile(**self._kwargs)
        self._prof.__enter__()
        _running_profilers.add(id(self))
        self._add_distributed_info()

    def stop(self) -> None:
        # torch keeps one profiler session per process: a profiler the program started and stopped during ours
        # ended our session too (torch clears its "enabled" flag then). Exporting what is left crashed the trainer
        # (SIGSEGV in export_chrome_trace), so there is nothing to export.
        taken_over = not getattr(self._torch.autograd.profiler, "_is_profiler_enabled", True)
        _running_profilers.discard(id(self))
        self._prof.__exit__(None, None, None)
        if taken_over:
            raise TraceFailed("the program started its own torch profiler during the trace, which ended ours")

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


def _profiler_factory(spec: TraceSpec, all_threads: bool) -> Callable[[], Any]:
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.__spec__, "_initializing", False) or not hasattr(torch, "autograd"):
        raise TraceFailed("torch is not loaded in this process")
    if spec.with_stack and "torch.profiler.python_tracer" not in sys.modules:
        import torch.profiler.python_tracer  # noqa: F401 - a leaf module the profiler's stop would import
    return lambda: _Profiler(torch, spec, all_threads)


def _sleep_until(when_ms: int, cancel: threading.Event) -> None:
    while not cancel.is_set():
        left = (when_ms - _now_ms()) / 1000.0
        if left <= 0:
            return
        cancel.wait(min(left, 1.0))


def _export(profiler: Any, spec: TraceSpec, files: OutputFiles | None = None) -> TraceResult:
    files = files or OutputFiles(spec.output_path)
    raw = files.raw
    note = ""
    try:
        with files.creating():  # not even begun once abandoned (the program exits)
            pass
        profiler.export_chrome_trace(str(raw))
        if not raw.exists():
            # libkineto logs "Failed to write to log file!" (e.g. a full disk) instead of raising
            raise TraceFailed(f"the profiler could not write its trace to {raw.parent}{_free_space(raw.parent)}")
        flops = profiler.flop_counts() if spec.with_flops else {}
        flop_args = FlopArgs(flops) if flops else None
        size = write_trace_file(raw, spec.output_path, spec.trace_id, files, flop_args)
        if spec.with_flops:
            note = flops_note(flops, flop_args)
            if note:
                log.info("dyno agent: trace %s: %s", spec.trace_id, note)
    except TraceFailed:
        raise
    except TraceAbandoned as e:
        raise TraceFailed(str(e)) from e
    except Exception as e:
        raise TraceFailed(f"exporting the trace failed: {type(e).__name__}: {e}") from e
    finally:
        # The raw export, and libkineto's own temp file of it, left when its write failed
        for path in files.temporaries()[:2]:
            unlink_quietly(path)
    return TraceResult(spec.output_path, size, note)


def _add_note(result: TraceResult, note: str) -> TraceResult:
    return replace(result, note="; ".join(n for n in (note, result.note) if n))


def _free_space(directory: Path) -> str:
    note = free_space_note(directory)
    return f" ({note})" if note else ""


def _deadline_ms(spec: TraceSpec) -> int:
    return spec.deadline_ms or _now_ms() + int(_DEFAULT_ITERATION_DEADLINE_S * 1000)


def run_trace(
    spec: TraceSpec,
    steps: StepCounter,
    cancel: threading.Event,
    on_running: Callable[[], None],
    exiting: threading.Event | None = None,
    files: OutputFiles | None = None,
) -> TraceResult:
    """Take the trace described by spec and write its file. Blocks the calling (agent) thread, not the trainer.
    Raises TraceFailed with the reason; returns early with TraceFailed("cancelled") when `cancel` is set. When
    `exiting` is set too (the program is exiting normally), a duration trace that is recording stops early and
    what it recorded is written, with a note in the result; one not recording yet is cancelled all the same.
    `files`: the trace's output files (default: of spec.output_path), which the caller may abandon meanwhile."""
    files = files or OutputFiles(spec.output_path)
    if spec.start_time_ms and spec.deadline_ms and spec.start_time_ms >= spec.deadline_ms:
        raise TraceFailed("the requested start time is past the trace's deadline")
    _check_output_dir(spec.output_path)
    steps.wait_idle(cancel)
    if spec.iterations:
        return _run_iterations(spec, steps, cancel, on_running, files)
    if not spec.duration_ms or spec.duration_ms <= 0:
        raise TraceFailed("the request has neither a duration nor an iteration count")
    make = _profiler_factory(spec, all_threads=True)
    if spec.start_time_ms:
        _sleep_until(spec.start_time_ms, cancel)
    if cancel.is_set():
        raise TraceFailed("cancelled")
    profiler = make()
    profiler.start()
    on_running()
    started = time.monotonic()
    stop_at = started + spec.duration_ms / 1000.0
    while not cancel.is_set() and time.monotonic() < stop_at:
        cancel.wait(min(stop_at - time.monotonic(), 1.0))
    recorded_s = time.monotonic() - started
    profiler.stop()
    if not cancel.is_set():
        return _export(profiler, spec, files)
    if exiting is None or not exiting.is_set():
        raise TraceFailed("cancelled")
    result = _export(profiler, spec, files)
    return _add_note(result, exited_early_note(f"{recorded_s:.1f} s", f"{spec.duration_ms / 1000.0:g} s"))


def _run_iterations(
    spec: TraceSpec, steps: StepCounter, cancel: threading.Event, on_running: Callable[[], None], files: OutputFiles
) -> TraceResult:
    if not steps.installed:
        raise TraceFailed("no optimizer step hook: torch.optim is not loaded in this process")
    plan = _IterationPlan(spec, _profiler_factory(spec, all_threads=False))
    steps.set_plan(plan)
    deadline = _deadline_ms(spec)

    def wait(event: threading.Event) -> bool:
        # plan.finished ends the wait for the start too: a profiler that failed to start on the training thread
        # finishes the plan without starting it (this waited for the deadline, up to 10 minutes, to say so).
        while not event.is_set() and not plan.finished.is_set() and not cancel.is_set() and _now_ms() < deadline:
            event.wait(min(max(deadline - _now_ms(), 1) / 1000.0, 0.5))
        return event.is_set()

    if wait(plan.started):
        on_running()
        wait(plan.finished)
    if not plan.finished.is_set():
        steps.abandon(plan)
    if plan.error:
        raise TraceFailed(plan.error)
    if not plan.completed:
        if cancel.is_set():
            raise TraceFailed("cancelled")
        if not plan.started.is_set():
            raise TraceFailed("no optimizer step started the trace before the deadline (is the trainer stepping?)")
        raise TraceFailed(f"only {plan.steps_seen} of {spec.iterations} optimizer steps before the deadline")
    result = _export(plan.profiler, spec, files)
    if plan.ended_early:
        note = exited_early_note(f"{plan.steps_seen} optimizer step(s)", f"{spec.iterations}")
        return _add_note(result, note)
    return result
