"""Running one torch.profiler trace for the agent, and writing its file.

Duration traces run on the agent's worker thread (`profile_all_threads=True`, without which a profiler started
off the training thread records nothing of it). Iteration traces start and stop inside the global optimizer step
post-hook, i.e. on the training thread, so they capture exactly N steps. torch is imported lazily: this module is
importable (and `write_trace_file` usable) without it. The parts: spec (the values), steps (the step
hook), profiler (the profiler), trace_file (the file), flops (with_flops).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from dyno.client.agent.flops import FlopArgs, flops_note
from dyno.client.agent.output import OutputFiles, TraceAbandoned, unlink_quietly
from dyno.client.agent.profiler import profiler_factory
from dyno.client.agent.spec import AgentTraceSpec, TraceFailed, TraceResult, exited_early_note, now_ms
from dyno.client.agent.steps import IterationPlan, StepCounter
from dyno.client.agent.trace_file import check_output_dir, write_trace_file
from dyno.diskspace import free_space_note

__all__ = [
    "AgentTraceSpec",
    "TraceResult",
    "TraceFailed",
    "StepCounter",
    "exited_early_note",
    "run_trace",
    "write_trace_file",
]

log = logging.getLogger(__name__)

_DEFAULT_ITERATION_DEADLINE_S = 600.0  # when the daemon sets none: never wait forever for optimizer steps
# An iteration trace that waits for optimizer steps tells dynod why, once it is unusual (StepCounter.waiting_note),
# and again every this many seconds while it lasts (its "for N s" grows): dyno-cli shows it when its --timeout-s gives
# up on the process, rather than only "no optimizer step had started the trace".
_WAITING_REPORT_S = 5.0
# A duration trace that starts this late after its synchronized start time says so: its window is not the other
# processes' (the request reached this process late, or it was busy), which a cross-rank comparison must know.
_LATE_START_NOTE_MS = 500


def _sleep_until(when_ms: int, cancel: threading.Event) -> None:
    while not cancel.is_set():
        left = (when_ms - now_ms()) / 1000.0
        if left <= 0:
            return
        cancel.wait(min(left, 1.0))


def _export(profiler: Any, spec: AgentTraceSpec, files: OutputFiles | None = None) -> TraceResult:
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


def _deadline_ms(spec: AgentTraceSpec) -> int:
    return spec.deadline_ms or now_ms() + int(_DEFAULT_ITERATION_DEADLINE_S * 1000)


def run_trace(
    spec: AgentTraceSpec,
    steps: StepCounter,
    cancel: threading.Event,
    on_running: Callable[[], None],
    exiting: threading.Event | None = None,
    files: OutputFiles | None = None,
    on_waiting: Callable[[str, bool], None] | None = None,
) -> TraceResult:
    """Take the trace described by spec and write its file. Blocks the calling (agent) thread, not the trainer.
    Raises TraceFailed with the reason; returns early with TraceFailed("cancelled") when `cancel` is set. When
    `exiting` is set too (the program is exiting normally), a duration trace that is recording stops early and
    what it recorded is written, with a note in the result; one not recording yet is cancelled all the same.
    `files`: the trace's output files (default: of spec.output_path), which the caller may abandon meanwhile.
    `on_waiting(note, recording)`: an iteration trace's waiting note (why it has not finished: no optimizer step
    for N s ...; "" once it steps again), when it changes and every _WAITING_REPORT_S while it lasts."""
    files = files or OutputFiles(spec.output_path)
    if spec.start_time_ms and spec.deadline_ms and spec.start_time_ms >= spec.deadline_ms:
        raise TraceFailed("the requested start time is past the trace's deadline")
    check_output_dir(spec.output_path)
    steps.wait_idle(cancel)
    if spec.iterations:
        return _run_iterations(spec, steps, cancel, on_running, files, on_waiting or (lambda note, recording: None))
    if not spec.duration_ms or spec.duration_ms <= 0:
        raise TraceFailed("the request has neither a duration nor an iteration count")
    make = profiler_factory(spec, all_threads=True)
    if spec.start_time_ms:
        _sleep_until(spec.start_time_ms, cancel)
    if cancel.is_set():
        raise TraceFailed("cancelled")
    late_ms = now_ms() - spec.start_time_ms if spec.start_time_ms else 0  # before the profiler's own start-up
    profiler = make()
    profiler.start()
    on_running()
    started = time.monotonic()
    stop_at = started + spec.duration_ms / 1000.0
    while not cancel.is_set() and time.monotonic() < stop_at:
        cancel.wait(min(stop_at - time.monotonic(), 1.0))
    recorded_s = time.monotonic() - started
    profiler.stop()
    late = _late_start_note(late_ms)
    if not cancel.is_set():
        return _add_note(_export(profiler, spec, files), late)
    if exiting is None or not exiting.is_set():
        raise TraceFailed("cancelled")
    result = _add_note(_export(profiler, spec, files), late)
    return _add_note(result, exited_early_note(f"{recorded_s:.1f} s", f"{spec.duration_ms / 1000.0:g} s"))


def _late_start_note(late_ms: int) -> str:
    if late_ms < _LATE_START_NOTE_MS:
        return ""
    return (
        f"started {late_ms / 1000.0:.1f} s after the synchronized start time (the request reached this process late): "
        "not aligned with the other processes"
    )


class _WaitingReports:
    """Sends an iteration trace's waiting note when it changes between none and some, and every
    _WAITING_REPORT_S while there is one."""

    def __init__(self, report: Callable[[str, bool], None]) -> None:
        self._report = report
        self.sent = ""  # as dynod has it: a RUNNING report clears it there
        self._at = 0.0

    def update(self, note: str, recording: bool) -> None:
        now = time.monotonic()
        if note == self.sent or (note and self.sent and now - self._at < _WAITING_REPORT_S):
            return
        self._report(note, recording)
        self.sent, self._at = note, now


def _run_iterations(
    spec: AgentTraceSpec,
    steps: StepCounter,
    cancel: threading.Event,
    on_running: Callable[[], None],
    files: OutputFiles,
    on_waiting: Callable[[str, bool], None],
) -> TraceResult:
    if not steps.installed:
        raise TraceFailed("no optimizer step hook: torch.optim is not loaded in this process")
    plan = IterationPlan(spec, profiler_factory(spec, all_threads=False))
    steps.set_plan(plan)
    deadline = _deadline_ms(spec)
    since = steps.now()
    stalled: list[str] = []  # why the wait gave up early: a process that has never stepped (StepCounter.stall)
    waiting = _WaitingReports(on_waiting)

    def wait(event: threading.Event) -> bool:
        # plan.finished ends the wait for the start too: a profiler that failed to start on the training thread
        # finishes the plan without starting it (this waited for the deadline, up to 10 minutes, to say so).
        while not event.is_set() and not plan.finished.is_set() and not cancel.is_set() and now_ms() < deadline:
            why = steps.stall(since)
            if why is not None:
                stalled.append(why)
                return False
            waiting.update(steps.waiting_note(plan, since), plan.started.is_set())
            event.wait(min(max(deadline - now_ms(), 1) / 1000.0, 0.5))
        return event.is_set()

    if wait(plan.started):
        on_running()  # a RUNNING report without a note: dynod clears the waiting note it had
        waiting.sent = ""
        wait(plan.finished)
    if not plan.finished.is_set():
        steps.abandon(plan)
    if plan.error:
        raise TraceFailed(plan.error)
    if not plan.completed:
        if cancel.is_set():
            raise TraceFailed("cancelled")
        if stalled:  # only before the trace starts: a process that has never stepped
            raise TraceFailed(stalled[0])
        why = steps.idle_reason(since)
        if not plan.started.is_set():
            raise TraceFailed(f"no optimizer step started the trace before the deadline: {why or 'is it training?'}")
        raise TraceFailed(
            f"only {plan.steps_seen} of {spec.iterations} optimizer steps before the deadline{why and ': ' + why}"
        )
    result = _export(plan.profiler, spec, files)
    if plan.ended_early:
        note = exited_early_note(f"{plan.steps_seen} optimizer step(s)", f"{spec.iterations}")
        return _add_note(result, note)
    return result
