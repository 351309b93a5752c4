"""The agent of one process: its connection thread (DaemonConnection) and its trace thread, the trace queue, and
what happens to a trace when the program exits or the daemon goes away. `dyno.client.agent.start()` makes the one
of the process.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dyno.client.agent.connection import DaemonConnection
from dyno.client.agent.env import AgentIdentity, multiprocessing_role, resolve_identity
from dyno.client.agent.output import OutputFiles
from dyno.client.agent.trace import AgentTraceSpec, StepCounter, TraceFailed, run_trace
from dyno.trace_options import options_from_pb

__all__ = ["Agent", "EXIT_FINISH_S"]

log = logging.getLogger("dyno.client.agent")  # one logger name for the agent's own lines

_IDLE_TICK_S = 1.0
# At a normal exit during a trace: how long the program's exit may wait for the profiler to stop, the
# recorded part to be written and reported. Past it the trace is reported failed and the program exits.
EXIT_FINISH_S = 5.0


def _torch_loaded() -> bool:
    # Fully imported, not just begun: importing grpc here while the main thread is inside torch's import is
    # avoidable risk.
    torch = sys.modules.get("torch")
    return torch is not None and not getattr(getattr(torch, "__spec__", None), "_initializing", False)


def _spec_from_pb(cfg: Any) -> AgentTraceSpec:
    return AgentTraceSpec(
        trace_id=cfg.trace_id,
        output_path=Path(cfg.output_path),
        deadline_ms=cfg.deadline_ms,
        **options_from_pb(cfg),
    )


class Agent:
    """One per process (use the module-level `start()`). Threads are started by `start()`."""

    def __init__(
        self,
        job_id: str | None = None,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        rank: int | None = None,
        local_rank: int | None = None,
        world_size: int | None = None,
        wait_for_torch: bool = False,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._pid = os.getpid()
        # the explicit arguments (None: from the environment), to tell a later start() what it cannot change
        self.started_with = explicit_args(job_id, socket_path, rank, local_rank, world_size)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.steps = StepCounter()

        def identify() -> AgentIdentity:  # again at each registration: the environment may have changed
            return resolve_identity(job_id, rank=rank, local_rank=local_rank, world_size=world_size)

        self._conn = DaemonConnection(
            socket_path,
            identify,
            self._dispatch,
            self._stopping,
            may_register=self._may_register if wait_for_torch else None,
            on_session_end=self._session_ended,
            min_backoff_s=min_backoff_s,
            max_backoff_s=max_backoff_s,
        )
        self._queue: queue.Queue[AgentTraceSpec | None] = queue.Queue()
        # trace id -> its cancel event, for the running trace and those queued behind a cancelled one
        self._traces: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []
        self._exiting = threading.Event()  # the program is exiting normally: finish a recording trace early
        self._recording: AgentTraceSpec | None = None  # the trace whose profiler runs (RUNNING reported), if any
        self._idle = threading.Event()  # set while no trace is being run by the trace thread
        self._idle.set()
        self._given_up: str | None = None  # a trace reported failed at exit while still being written
        self._files: OutputFiles | None = None  # the files of the trace being run
        self._abandoned: OutputFiles | None = None  # those of the trace given up at exit (swept again at stop)
        self._exit_hook = False

    # --- public ---------------------------------------------------------------------------------------------

    @property
    def registered(self) -> bool:
        """True while registered with a daemon and watching for requests."""
        return self._conn.registered.is_set()

    def wait_registered(self, timeout_s: float | None = None) -> bool:
        return self._conn.registered.wait(timeout_s)

    @property
    def socket_path(self) -> Path:
        """The daemon's socket: the one connected to, or tried last."""
        return self._conn.socket_path

    @property
    def socket_candidates(self) -> tuple[Path, ...]:
        """Where the daemon's socket is looked for, in order (env.socket_candidates)."""
        return self._conn.socket_candidates

    @property
    def identity(self) -> AgentIdentity:
        """What this process registers (registered) with."""
        return self._conn.identity

    @property
    def session_id(self) -> str:
        return self._conn.session_id

    @property
    def registrations(self) -> int:
        """Successful Register calls (> 1 after a daemon restart)."""
        return self._conn.registrations

    def start(self) -> Agent:
        # The optimizer hook goes in on this (the trainer's) thread, or on the thread importing torch.optim.
        try:
            self.steps.install()
        except Exception:
            log.debug("dyno agent: cannot install the optimizer step hook", exc_info=True)
        for target, name in ((self._conn.run, "dyno-agent"), (self._trace_loop, "dyno-agent-trace")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def finish_at_exit(self, timeout_s: float = EXIT_FINISH_S) -> None:
        """At a normal exit (atexit): a trace that is recording stops early, and what it recorded is written and
        reported done with a note; waits at most timeout_s for that, then reports it failed. A trace not recording
        yet (and an iteration trace this thread cannot stop) is left to stop(), which cancels it. Registered when a
        trace first starts recording, so that it runs before torch's and grpc's own atexit handlers (LIFO) and
        before stop() closes the channel."""
        if os.getpid() != self._pid or self._stopping.is_set():
            return
        with self._lock:
            spec = self._recording
            cancel = self._traces.get(spec.trace_id) if spec else None
        if spec is None or cancel is None or cancel.is_set():
            return
        trace_id = spec.trace_id
        # An iteration trace's profiler is stopped here, on this thread, if this is the thread that trained;
        # otherwise it is left as it was (stop() cancels it; the daemon says the process exited mid-trace).
        if spec.iterations and not self.steps.finish_early():
            return
        log.info("dyno agent: the program is exiting during trace %s; writing what was recorded", trace_id)
        self._exiting.set()
        cancel.set()
        if self._idle.wait(timeout_s):
            return
        with self._lock:
            late = self._recording is spec
            if late:
                self._given_up, self._abandoned = trace_id, self._files
        if late:
            # The program exits now, maybe in the middle of the export: nothing of the trace may stay in the trace
            # folder (a partial export, a half-written copy). What the export writes after this, stop() sweeps
            # again, and dynod once the process is gone.
            if self._abandoned is not None:
                self._abandoned.abandon()
            self._report(
                trace_id,
                "FAILED",
                error=f"the program exited during the trace and writing what it had recorded took longer than "
                f"{timeout_s:g} s; no file",
            )

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop both threads; a running trace is cancelled (no file). Safe to call twice and from atexit."""
        if os.getpid() != self._pid:  # a forked child inherited this object but none of its threads
            return
        self._stopping.set()
        with self._lock:
            cancels = list(self._traces.values())
        for cancel in cancels:
            cancel.set()
        self._conn.cancel()
        self._queue.put(None)  # wakes the trace thread
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        if self._abandoned is not None:  # what the export of a trace given up at exit wrote since
            self._abandoned.abandon()

    # --- commands from the daemon --------------------------------------------------------------------------

    def _may_register(self) -> bool:
        """Auto-started (dyno-run): only processes that use torch register, and of multiprocessing spawn children
        only trainers (torch.multiprocessing.spawn workers), not helpers (DataLoader workers), whose agent stops."""
        argv = getattr(sys, "orig_argv", None) or sys.argv
        role = multiprocessing_role(argv, sys.modules.get("multiprocessing"))
        if role == "helper":
            self._stopping.set()
            self._queue.put(None)  # wakes the trace thread, which ends too
            return False
        return role == "process" and _torch_loaded()

    def _session_ended(self) -> None:
        """The Watch stream ended (the daemon restarted or went away): the daemon has marked this process's traces
        failed (disconnected mid-trace), and a restarted one never knew them. A trace that is recording goes on: its
        file is written to the path it was given (under the daemon's trace dir) and reported done once the agent has
        registered again, and the restarted daemon takes it on from that report (dyno.daemon.tracing.agent_side), so
        what was being recorded can be fetched. The others are cancelled: one still waiting (for its start time, or for
        optimizer steps that may never come) held this process "busy" for new requests up to its deadline (10
        minutes; an hour for a distant start time), and none of them could be reported or fetched."""
        with self._lock:
            recording = self._recording.trace_id if self._recording is not None else None
            cancels = [c for tid, c in self._traces.items() if not c.is_set() and tid != recording]
            keeps = recording is not None and recording in self._traces and not self._traces[recording].is_set()
        for cancel in cancels:
            cancel.set()
        if cancels:
            log.info("dyno agent: lost the daemon before a trace started recording; the trace is cancelled")
        if keeps:
            log.info(
                "dyno agent: lost the daemon while trace %s records; it goes on, and its file is reported to the "
                "daemon once it is back",
                recording,
            )

    def _dispatch(self, command: Any) -> None:
        kind = command.WhichOneof("kind")
        if kind == "trace":
            self._submit(_spec_from_pb(command.trace))
        elif kind == "cancel_trace_id":
            with self._lock:
                cancel = self._traces.get(command.cancel_trace_id)
            if cancel is not None:
                cancel.set()

    # --- traces -----------------------------------------------------------------------------------------------

    def _submit(self, spec: AgentTraceSpec) -> None:
        # One trace at a time; a cancelled one still winding down (profiler stop) does not make us busy.
        with self._lock:
            busy = next((tid for tid, cancel in self._traces.items() if not cancel.is_set()), None)
            if busy is None:
                self._traces[spec.trace_id] = threading.Event()
        if busy is not None:
            self._report(spec.trace_id, "FAILED", error=f"busy: trace {busy} is still running in this process")
            return
        self._queue.put(spec)

    def _trace_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                spec = self._queue.get(timeout=_IDLE_TICK_S)
            except queue.Empty:
                self._conn.check_keepalive()
                continue
            if spec is not None:
                self._run_one(spec)

    def _run_one(self, spec: AgentTraceSpec) -> None:
        with self._lock:
            cancel = self._traces.setdefault(spec.trace_id, threading.Event())
        if cancel.is_set():  # cancelled while queued: the daemon already knows
            with self._lock:
                self._traces.pop(spec.trace_id, None)
            return
        outcome: dict[str, Any]
        files = OutputFiles(spec.output_path)
        with self._lock:
            self._files = files
        self._idle.clear()
        try:
            result = run_trace(
                spec,
                self.steps,
                cancel,
                lambda: self._on_recording(spec),
                self._exiting,
                files,
                on_waiting=lambda note, recording: self._on_waiting(spec, note, recording),
            )
            outcome = {"state": "DONE", "path": str(result.path), "size_bytes": result.size_bytes}
            if result.note:
                outcome["error"] = result.note  # the daemon keeps a done trace's text as its note
            log.info("dyno agent: trace %s written to %s (%d bytes)", spec.trace_id, result.path, result.size_bytes)
        except TraceFailed as e:
            log.info("dyno agent: trace %s failed: %s", spec.trace_id, e)
            outcome = {"state": "FAILED", "error": str(e)}
        except Exception as e:  # noqa: BLE001
            log.warning("dyno agent: trace %s failed unexpectedly", spec.trace_id, exc_info=True)
            outcome = {"state": "FAILED", "error": f"agent error: {type(e).__name__}: {e}"}
        finally:
            # Not busy any more *before* the final report: the daemon may hand us the next request the moment
            # that report lands (a back-to-back request would be refused as "busy" otherwise).
            with self._lock:
                self._traces.pop(spec.trace_id, None)
                self._recording, self._files = None, None
                given_up, self._given_up = self._given_up == spec.trace_id, None
        if given_up:  # finish_at_exit stopped waiting and reported it failed: no file may stay behind
            files.abandon()
        else:
            self._report(spec.trace_id, **outcome)
        self._idle.set()

    def _on_recording(self, spec: AgentTraceSpec) -> None:
        with self._lock:
            self._recording = spec
            first = not self._exit_hook
            self._exit_hook = True
        if first:
            # Now, not at start(): torch and grpc are loaded by now and their atexit handlers registered, so ours
            # runs before theirs and before stop() (atexit runs handlers last registered first).
            atexit.register(self.finish_at_exit)
        self._report(spec.trace_id, "RUNNING")

    def _on_waiting(self, spec: AgentTraceSpec, note: str, recording: bool) -> None:
        # Not a state change: DELIVERED (not recording yet) or RUNNING with the note (dynod keeps it as the process's
        # waiting note; a dynod from before such notes refuses DELIVERED, which is only logged at debug level).
        self._report(spec.trace_id, "RUNNING" if recording else "DELIVERED", error=note)

    def _report(self, trace_id: str, state: str, *, path: str = "", size_bytes: int = 0, error: str = "") -> None:
        self._conn.report(trace_id, state, path=path, size_bytes=size_bytes, error=error)


def explicit_args(
    job_id: str | None,
    socket_path: str | os.PathLike[str] | None,
    rank: int | None,
    local_rank: int | None,
    world_size: int | None,
) -> dict[str, Any]:
    socket = None if socket_path is None else os.fspath(socket_path)
    return {"job_id": job_id, "socket_path": socket, "rank": rank, "local_rank": local_rank, "world_size": world_size}
