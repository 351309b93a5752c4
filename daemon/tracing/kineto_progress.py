"""What dynod can tell of a libkineto (KINETO_USE_DAEMON=1) trace that has not finished, and how it says so.

libkineto reports nothing back and dynod cannot see its optimizer steps. What dynod does see, read in pytorch/kineto
(libkineto/src at commits 5b55368 for ConfigLoader.cpp and 972a353 for ActivityProfilerController.cpp; later versions
move canAcceptConfig() to AsyncActivityProfilerHandler.cpp, with the same `return !profiler_.isActive();`; the lines
relied on are quoted):
- ConfigLoader.cpp, ConfigLoader::updateConfigThread(): libkineto polls the daemon every on-demand interval whatever
  its profiler is doing (`} else if (now > prev_on_demand_load_time + onDemandConfigUpdateIntervalSecs_) {` ...
  `configureFromDaemon(now, *onDemandConfig);`), so a process polls for as long as it lives, during a trace too; one
  that exits stops polling, and its pid is gone (the registry drops it at its next pass: `process exited`).
- ConfigLoader::readOnDemandConfigFromDaemon(): `bool activities = canHandlerAcceptConfig(ConfigKind::
  ActivityProfiler);`, and ActivityProfilerController.cpp, ActivityProfilerController::canAcceptConfig():
  `return !profiler_->isActive();`: a poll asks for an activity config (its type has bit 2) unless the profiler is
  active (warming up or recording).
- ActivityProfilerController::shouldActivateTimestampConfig() returns false for an iteration config
  (`if (asyncRequestConfig_->hasProfileStartIteration()) { return false; }`): only ActivityProfilerController::step()
  activates it, on an optimizer step (`if (asyncRequestConfig_ && !profiler_->isActive() &&
  shouldActivateIterationConfig(currentIter)) { activateConfig(now); }`), once `currentIter` reaches the start
  iteration (rounded up to PROFILE_START_ITERATION_ROUNDUP).
So after the pickup (DELIVERED), polls that still ask for a config mean libkineto has not started recording: the
process has not reached its start step, i.e. has not stepped (enough) since; polls that no longer ask (RUNNING:
kineto_side.kineto_poll) mean it records, and its file is written once its N steps are done. Checked with torch
2.13 CPU: a trainer that stopped stepping stays DELIVERED, and turns RUNNING within a poll of stepping again.
"""

from __future__ import annotations

from dataclasses import dataclass

from dyno.daemon.tracing.values import TraceSpec, TraceState

__all__ = ["KinetoProgress"]

_BLIND = "dynod cannot see libkineto's optimizer steps, only its polls"
_ADVICE = (
    "if the program has stopped stepping its optimizer (evaluating, checkpointing, finished, or hung?), trace it "
    "with --duration-ms instead, or again once it trains"
)


def _seconds(ms: int) -> str:
    return f"{max(0, ms) / 1000:.0f} s"


@dataclass(frozen=True)
class KinetoProgress:
    """What dynod knows of a libkineto process's part in a trace, as of `now_ms`: its state, when libkineto picked
    the request up (`delivered_ms`) and when it turned RUNNING (`running_ms`), and its last poll (`last_poll_ms`, 0
    once it is gone). Each text is "" for a part that is not an iteration trace libkineto has picked up."""

    spec: TraceSpec
    state: TraceState
    delivered_ms: int
    running_ms: int
    now_ms: int
    last_poll_ms: int

    def _where(self) -> str:
        """Where the iteration trace stands, as its polls tell."""
        if self.spec.iterations is None or self.state not in (TraceState.DELIVERED, TraceState.RUNNING):
            return ""
        if not self.delivered_ms:
            return ""
        picked = f"libkineto picked the request up {_seconds(self.now_ms - self.delivered_ms)} ago"
        if self.state == TraceState.DELIVERED:
            roundup = max(1, self.spec.start_iteration_roundup or 1)
            polled = (
                f" at its last poll ({_seconds(self.now_ms - self.last_poll_ms)} ago) it" if self.last_poll_ms else ""
            )
            return (
                f"{picked}, and{polled} had not started recording: it starts at an optimizer.step() whose number is a "
                f"multiple of {roundup} (--iteration-roundup), and the process has not reached one since ({_BLIND})"
            )
        return (
            f"{picked} and has recorded for {_seconds(self.now_ms - self.running_ms)} without finishing its "
            f"{self.spec.iterations} optimizer step(s): its file is written once they are done ({_BLIND})"
        )

    def waiting_note(self) -> str:
        """ProcessTraceView.waiting of a live process: what it waits for, and what to do if that never comes
        (dyno-cli shows it when it gives up on the process; dynod's own deadline comes 10 minutes after the
        pickup)."""
        where = self._where()
        return f"{where}; {_ADVICE}" if where else ""

    def deadline_reason(self) -> str:
        """The TIMED_OUT reason of a live process past dynod's deadline."""
        where = self._where()
        if not where:
            return ""
        return (
            f"no complete trace file by the deadline, {_seconds(self.now_ms - self.delivered_ms)} after the pickup: "
            f"{where}; the process was alive (it polled), but did not make the optimizer steps in that time; {_ADVICE}"
        )

    def exit_detail(self) -> str:
        """What a process that exited mid-trace had done of its iteration trace (": ...")."""
        where = self._where()
        return f": {where}" if where else ""
