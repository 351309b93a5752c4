"""Counting optimizer steps for iteration traces: torch's global optimizer step post-hook, installed on the thread
that imports torch.optim, runs the current iteration plan, which starts and stops the profiler on the training
thread so that a trace holds exactly N steps."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from dyno.client.agent.spec import AgentTraceSpec, TraceFailed, now_ms
from dyno.import_watch import after_import

__all__ = ["IterationPlan", "StepCounter", "NO_STEP_S", "STALL_FACTOR", "STARTUP_S"]

log = logging.getLogger(__name__)

_OPTIMIZER_MODULE = "torch.optim.optimizer"
_WIND_DOWN_S = 5.0  # how long a new trace waits for an abandoned iteration trace's profiler to stop
# An iteration trace of a process that has never stepped a torch.optim optimizer (an inference loop, a hand-written
# update) gives up after NO_STEP_S without one, instead of waiting for its deadline (dynod's 10 minutes, dyno-cli's
# whole --timeout-s) to fail without saying why. A young process (counting steps for less than STARTUP_S) may still
# be loading data or compiling, and one that has stepped before may be evaluating or checkpointing between steps:
# both wait for the deadline, whose failure then says how long the process has not stepped (idle_reason).
# STALL_FACTOR: a pause this many times the longest seen between two steps counts as "stopped stepping".
NO_STEP_S = 30.0
STARTUP_S = 300.0
STALL_FACTOR = 3.0


class IterationPlan:
    """An iteration trace in progress; driven by StepCounter on the training thread."""

    def __init__(self, spec: AgentTraceSpec, make_profiler: Callable[[], Any]) -> None:
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
            if self.spec.start_time_ms and now_ms() < self.spec.start_time_ms:
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

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.steps = 0
        self._clock = clock
        self.installed_at = clock()  # when counting began: the hook's installation
        self.last_step_at = 0.0  # clock() at the last optimizer step; 0.0 before the first
        self.longest_gap_s = 0.0  # the longest pause between two steps seen
        self._plan: IterationPlan | None = None
        self._installed = False
        self._lock = threading.Lock()
        self._plan_lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> None:
        """Register the hook now if torch.optim is loaded, else as soon as it finishes loading."""
        module = sys.modules.get(_OPTIMIZER_MODULE)
        if module is not None and not hasattr(module, "register_optimizer_step_post_hook"):
            return  # a torch too old for the global hook (or torch.optim still importing: the hook comes later)
        after_import(_OPTIMIZER_MODULE, self._register)

    def _register(self, module: Any) -> None:
        try:
            with self._lock:
                if self._installed:
                    return
                module.register_optimizer_step_post_hook(self._hook)
                self._installed = True
                self.installed_at = self._clock()
        except Exception:
            log.debug("dyno agent: optimizer hook installation failed", exc_info=True)
            return
        log.debug("dyno agent: optimizer step hook installed")

    def _hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # The training thread's hot path: a clock read, an increment and a few attribute reads when no trace runs.
        now = self._clock()
        if self.steps and now - self.last_step_at > self.longest_gap_s:
            self.longest_gap_s = now - self.last_step_at
        self.last_step_at = now
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

    def set_plan(self, plan: IterationPlan) -> None:
        self._plan = plan

    def now(self) -> float:
        """The clock stall() measures with (time.monotonic unless a test gives another)."""
        return self._clock()

    def stall(self, since: float) -> str | None:
        """Why an iteration trace waiting since clock() `since` should give up before its deadline, or None. Only a
        process that has never stepped gives up early: no optimizer step in NO_STEP_S since the request, after
        counting steps for at least STARTUP_S (a younger one may still be starting up). The reason says what to do."""
        now = self._clock()
        if self.steps or now - since < NO_STEP_S or now - self.installed_at < STARTUP_S:
            return None
        return self.idle_reason(since)

    def idle_reason(self, since: float) -> str:
        """How long the process has gone without an optimizer step since clock() `since` or its last step, when
        that is unusually long (NO_STEP_S, or STALL_FACTOR times its longest pause between steps if longer), with
        what to do; "" while it steps as usual (a trace that ran out of time on slow steps)."""
        now = self._clock()
        idle_s = now - max(since, self.last_step_at)
        if idle_s < max(NO_STEP_S, STALL_FACTOR * self.longest_gap_s):
            return ""
        advice = (
            "--iterations counts optimizer.step() calls of torch.optim optimizers (torch's global optimizer step "
            "post-hook); trace a program that steps none (inference, a hand-written update) with --duration-ms"
        )
        if not self.steps:
            return (
                f"no optimizer step in {idle_s:.0f} s: this process has not called optimizer.step() since the agent "
                f"started counting steps {now - self.installed_at:.0f} s ago; {advice}, and one still starting up "
                "(loading data, compiling) again once it trains"
            )
        return (
            f"no optimizer step for {idle_s:.0f} s (the longest pause between two of its {self.steps} steps so far: "
            f"{self.longest_gap_s:.1f} s): the program has stopped stepping its optimizer (evaluating, checkpointing, "
            f"finished, or hung?); {advice}, or trace again when it trains"
        )

    def waiting_note(self, plan: IterationPlan, since: float) -> str:
        """Why `plan` (waiting since clock() `since`) has not finished, when that is unusual (idle_reason), with the
        steps it has recorded once started; "" while the process steps as usual."""
        why = self.idle_reason(since)
        if not why or not plan.started.is_set():
            return why
        return f"recorded {plan.steps_seen} of {plan.spec.iterations} optimizer steps; {why}"

    def abandon(self, plan: IterationPlan) -> None:
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
