"""Periodic profiling as dynod runs it: at each job's moments (schedule.py) a trace of its lowest ranks on this host
(policy.py), within the budget (budget.py), through the trace manager like any trace: its files land in the trace
dir (so trace retention bounds them), `dyno-cli fetch --trace-id periodic-...` gathers them, an on-demand trace of
the same processes cancels it (dyno.daemon.tracing.preemption).

`tick()` does one pass (plain, tested with a fake clock); `start()` seeds the budget from the trace dir's records
(`resume()`: resume.py), then runs it on a thread every TICK_S.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.profiling.budget import Budget, binding_note, profiled_ms
from dyno.daemon.profiling.policy import (
    JobState,
    PeriodicSettings,
    SkipReason,
    choose,
    lead_ms,
    skip_reason,
    trace_spec,
)
from dyno.daemon.profiling.resume import resume_budget
from dyno.daemon.profiling.schedule import Schedule
from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.registry import ProcessRegistry, now_ms
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceLimitError, TraceRequestError, UnknownTraceError
from dyno.logthrottle import ThrottledLog

__all__ = ["SCAN_MS", "TICK_S", "PeriodicProfiler", "job_state"]

log = logging.getLogger(__name__)

TICK_S = 0.25  # the longest wait between passes (they wake at a job's moment, when one is sooner)
# New jobs are looked for this often; a job is looked at otherwise only when its next moment is near, so that a pass
# costs nothing with thousands of registered processes. A job registered less than this before a moment may take
# that moment late (a job is that young only with periodic_min_job_age_s below it).
SCAN_MS = 2_000
_SKIP_LOG_EVERY_S = 600.0  # the same job skipped for the same reason: an INFO line at most every 10 minutes
_MAX_SKIP_KEYS = 4096  # (job, reason) pairs whose last skip line is remembered


def job_state(job_id: str, procs: Sequence[RegisteredProcess], records: Sequence[JobRecord]) -> JobState:
    """A registered job with what job accounting says of it (running, since when: its oldest running record)."""
    starts = [r.first_seen_ms for r in records if r.running and r.job_id == job_id]
    return JobState(job_id, bool(starts), min(starts, default=0), tuple(procs))


class PeriodicProfiler:
    def __init__(
        self,
        settings: PeriodicSettings,
        manager: TraceManager,
        registry: ProcessRegistry,
        job_records: Callable[[], Sequence[JobRecord]],
        *,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.schedule = Schedule(settings.interval_ms)
        self.budget = Budget(settings.budget, settings.duration_ms)
        self._manager = manager
        self._registry = registry
        self._job_records = job_records
        self._clock_ms = clock_ms
        # per registered job (bounded by the registry): its last moment handled (taken or skipped), and when it is
        # to be looked at next (unix ms). Used by the thread that runs tick() only.
        self._handled: dict[str, int] = {}
        self._attention: dict[str, int] = {}
        self._next_scan_ms = 0
        self._in_flight: dict[str, str] = {}  # periodic trace id -> its job id, until it is measured
        self._skips = ThrottledLog(
            log,
            every_s=_SKIP_LOG_EVERY_S,
            clock=lambda: self._clock_ms() / 1000,
            max_keys=_MAX_SKIP_KEYS,
            level=logging.INFO,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self) -> None:
        s = self.settings
        log.info("periodic profiling: %s", self.describe_settings())
        note = binding_note(s.interval_ms / 1000, s.duration_ms, s.budget)
        if note:
            log.warning("periodic profiling: %s", note)
        self._thread = threading.Thread(target=self._run, name="periodic-profiling", daemon=True)
        self._thread.start()

    def resume(self) -> None:
        """Before the first pass: the budget counts the periodic traces of before a restart (resume.py)."""
        r = resume_budget(self.budget, self._manager.trace_dir)
        log.info(
            "periodic profiling: budget resumed from %d periodic trace record(s) of %d job(s) in %s: %.1f s under the "
            "profiler",
            r.traces,
            r.jobs,
            self._manager.trace_dir,
            r.profiled_ms / 1000,
        )

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        try:  # on this thread, before its first pass: dynod's start does not wait for the records to be read
            self.resume()
        except Exception:
            log.exception("periodic profiling: the budget could not be resumed from the trace records")
        wait = TICK_S
        while not self._stop.wait(wait):
            try:
                self.tick()
                wait = self._sleep_s()
            except Exception:  # one bad pass must not end periodic profiling (nor make it spin)
                log.exception("periodic profiling pass failed")
                wait = TICK_S

    def _sleep_s(self) -> float:
        """Until the next job's moment is due (a pass then hands its trace over on time, not up to TICK_S late: the
        hosts of a job should request within milliseconds of each other), at most TICK_S."""
        due = min(self._attention.values(), default=None)
        if due is None:
            return TICK_S
        return min(TICK_S, max(0.001, (due - self._clock_ms()) / 1000))

    # -- one pass ---------------------------------------------------------------------------------------------
    def tick(self) -> list[tuple[str, str, SkipReason | None]]:
        """Measure the periodic traces that ended, look for new jobs (every SCAN_MS), then handle the moment of each
        job whose next moment is due. Returns (job id, trace id, None when started or why skipped) of each moment
        handled in this pass."""
        if self._in_flight:
            self._measure()
        now = self._clock_ms()
        if now >= self._next_scan_ms:
            self._next_scan_ms = now + SCAN_MS
            live = set(self._registry.jobs())
            for gone in set(self._attention) - live:
                del self._attention[gone]
                self._handled.pop(gone, None)
            for job_id in live - set(self._attention):
                self._attention[job_id] = now  # a new job: its latest moment is handled now (skipped if long past)
        due = [j for j, t in self._attention.items() if t <= now]
        if not due:
            return []
        records = self._job_records()
        out = []
        for job_id in due:
            procs = self._registry.list(job_id)
            chosen = choose(procs, self._manager.roles(procs), self.settings.ranks_per_host)
            lead = lead_ms(chosen)
            moment = self.schedule.moment_at_or_before(job_id, now + lead)
            # the next look: when its next moment is due (a lead known from its processes of today)
            self._attention[job_id] = self.schedule.next_moment(job_id, now + lead) - lead
            if moment <= self._handled.get(job_id, -1):
                continue
            self._handled[job_id] = moment
            trace_id = self.schedule.trace_id(job_id, moment)
            why = self._take(job_state(job_id, procs, records), chosen, moment, now, trace_id)
            out.append((job_id, trace_id, why))
        return out

    def _take(
        self, job: JobState, chosen: list[RegisteredProcess], moment: int, now: int, trace_id: str
    ) -> SkipReason | None:
        flying = sum(self.budget.expected_ms(j) for j in self._in_flight.values() if j == job.job_id)
        allows = self.budget.allows(job.job_id, now - job.first_seen_ms, flying)
        why = skip_reason(job, chosen, moment, now, self.settings, budget_allows=allows)
        detail = ""
        if why is None:
            try:
                result = self._manager.start(trace_spec(job.job_id, trace_id, chosen, moment, self.settings))
            except (TraceRequestError, TraceLimitError, OSError) as e:
                why, detail = SkipReason.START_FAILED, str(e)
            else:
                if result.triggered:
                    self._in_flight[trace_id] = job.job_id
                    log.info(
                        "periodic profiling: trace %s of job %r started in pid(s) %s",
                        trace_id,
                        job.job_id,
                        ", ".join(str(v.pid) for v in result.triggered),
                    )
                    return None
                why, detail = SkipReason.BUSY, result.message
        if why != SkipReason.LATE:  # a job first seen between its moments, or a stalled pass: nothing to tell
            self._log_skip(job, trace_id, why, detail, now)
        return why

    def _log_skip(self, job: JobState, trace_id: str, why: SkipReason, detail: str, now: int) -> None:
        """Throttled per job and reason; the reason's text is built only for a line that is logged."""
        self._skips.emit_built(
            f"{job.job_id}\0{why.value}",
            "periodic profiling: %s of job %r skipped: %s",
            lambda: (trace_id, job.job_id, self._why(job, why, detail, now)),
        )

    def _why(self, job: JobState, why: SkipReason, detail: str, now: int) -> str:
        s = self.settings
        if why == SkipReason.TOO_YOUNG:
            age = max(now - job.first_seen_ms, 0)
            return f"the job is {age / 1000:.0f} s old, younger than periodic_min_job_age_s {s.min_job_age_ms / 1000:g}"
        if why == SkipReason.BUDGET:
            u = self.budget.usage(job.job_id)
            return (
                f"over budget: {u.profiled_ms / 1000:.1f} s profiled in {(now - job.first_seen_ms) / 1000:.0f} s of "
                f"the job, periodic_budget {s.budget:g}"
            )
        text = {
            SkipReason.NOT_RUNNING: "the job is not running in job accounting (not counted yet, or ended)",
            SkipReason.NO_TRAINER: "none of its processes on this host is a trainer (launchers, DataLoader workers)",
            SkipReason.ENDING: "its processes are ending (disconnected or silent)",
            SkipReason.BUSY: "its processes are tracing already (on-demand traces win)",
            SkipReason.START_FAILED: "the trace could not start",
        }.get(why, why.value)
        return f"{text}: {detail}" if detail else text

    def _measure(self) -> None:
        """The periodic traces that ended: their time under the profiler goes to the budget."""
        for trace_id, job_id in list(self._in_flight.items()):
            try:
                view = self._manager.get(trace_id)
            except UnknownTraceError:  # evicted or removed by retention before it was measured
                del self._in_flight[trace_id]
                continue
            if view.finished:
                del self._in_flight[trace_id]
                ms = profiled_ms(view)
                u = self.budget.record(job_id, ms)
                log.info(
                    "periodic profiling: trace %s of job %r ended: %.2f s under the profiler (%.1f s in %d trace(s))",
                    trace_id,
                    job_id,
                    ms / 1000,
                    u.profiled_ms / 1000,
                    u.traces,
                )

    # -- status -----------------------------------------------------------------------------------------------
    def describe_settings(self) -> str:
        s = self.settings
        return (
            f"on: every {s.interval_ms / 1000:g} s at a per-job offset, {s.iterations} steps (agent) or "
            f"{s.duration_ms} ms (libkineto), {s.ranks_per_host} rank(s) per host, budget {s.budget * 100:g}%, "
            f"jobs older than {s.min_job_age_ms / 1000:g} s"
        )

    def describe(self, max_jobs: int = 3) -> str:
        """GetStatus' periodic_profiling: the settings and the next moment of a few registered jobs."""
        now = self._clock_ms()
        jobs = sorted(self._registry.jobs())
        nexts = [
            f"{j} at {time.strftime('%H:%M:%SZ', time.gmtime(self.schedule.next_moment(j, now) // 1000))}"
            for j in jobs[:max_jobs]
        ]
        more = f" (+{len(jobs) - max_jobs} more)" if len(jobs) > max_jobs else ""
        return self.describe_settings() + (f"; next: {', '.join(nexts)}{more}" if nexts else "")
